"""`vertexdist estimate`: what a template costs and how fast its gradients can move, computed offline.

`formulas` holds the step-time model (docs/reference/perf-reliability.md §(b)); `hardware` the link speeds it
needs; `costs`, `communication` and `advice` apply them to a template; `report` puts the parts together.
"""
