"""Which figures a sweep gets (figures.py and pair_figures.py draw them for a few jobs,
many_jobs_figures.py for many): the list the report shows, in its order."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweeper.reporting import figures as fg
from sweeper.reporting import many_jobs_figures as many
from sweeper.reporting import pair_figures as pf


def all_figures(jobs: pd.DataFrame, cats: pd.DataFrame, bench: pd.DataFrame, out_dir: Path,
                modules: pd.DataFrame | None = None, recoverable: pd.DataFrame | None = None) -> list[fg.Figure]:
    """Every figure of the sweep; past MANY_JOBS finished jobs, the per-job ones in their
    grouped or ranked forms (sweeper/reporting/many_jobs_figures.py); with the modules
    table (time by model code), its figure first; with the roofline's rows (records that
    have them), the roofline against both roofs instead of the microbenchmarks' bandwidth."""
    many_jobs = len(fg._ok(jobs)) > fg.MANY_JOBS
    if many_jobs:
        figures = [many.shares_heatmap(jobs, cats, out_dir), many.busy_by_group(jobs, out_dir),
                   pf.pairs_figure(jobs, cats, out_dir), many.categories_top(jobs, cats, out_dir),
                   pf.autotune_figure(jobs, cats, bench, out_dir), many.roofline_by_family(bench, jobs, out_dir),
                   many.compile_ranked(jobs, out_dir)]
    else:
        figures = [fg.shares_figure(jobs, cats, out_dir), fg.busy_figure(jobs, out_dir), pf.pairs_figure(jobs, cats, out_dir),
                   fg.categories_figure(jobs, cats, out_dir), pf.autotune_figure(jobs, cats, bench, out_dir),
                   fg.roofline_figure(bench, out_dir), fg.compile_figure(jobs, out_dir)]
    if modules is not None:
        from sweeper.reporting.model_code import modules_figure

        figures.insert(0, modules_figure(jobs, modules, out_dir))
    if recoverable is not None and recoverable["bound_ms"].notna().any():
        from sweeper.reporting.roofline import roofs_figure

        figures = [roofs_figure(recoverable, jobs, out_dir, by_family=many_jobs) if f.name == "roofline" else f
                   for f in figures]
    elif fg.device_word(jobs) == "CPU":  # the bandwidth roofline needs a GPU's microbenchmarks: not even a note
        figures = [f for f in figures if f.name != "roofline"]
    return figures
