"""The functional matrix's tests; run them with ``vnetbench functional``."""
