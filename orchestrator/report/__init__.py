"""The dashboard: one self-contained HTML page per sweep (plotly inlined; no server, no network).

dashboard        the page's sections, in order; `write_dashboard`
page             tables (paged, filterable) and the page's assets
summary          aggregates per axis
verdict_section  the answers and the verdict, the suite summary, at the top
upgrade_section  the upgrade A/B: one word per model, then every setting's changes
answer_chart     time saved against run length, per model
figures          speedup, compile, memory, counts and parity charts
compile_charts   where the compile's seconds went; cache kinds
why_charts       scope, energy, roofline; the profile's kernels
convergence_chart  the loss curves of bench.convergence_steps
"""
