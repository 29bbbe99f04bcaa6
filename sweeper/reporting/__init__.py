"""After a sweep: records in, tables, figures and report.html out (pure, but for file writes).

load (a sweep folder's records), tables (one tidy DataFrame each: jobs, categories,
kernels, microbenchmarks), figures (matplotlib PNGs drawn from the tables), notes (the
report's warnings about noisy or odd jobs), report (the self-contained HTML page). The
commands `python -m sweeper.aggregate` and `python -m sweeper.history` drive them.
"""
