module vnetbench/flowgen

go 1.19
