"""`vnetbench report`: a comparison of stored result records as one self-contained
HTML file (tables + inline SVG charts), Markdown and CSV -- no Prometheus, no Grafana.

load (RESULTS -> runs: vnetbench.results.load) -> table (the one model) -> text / html + charts -> write."""
