"""Aggregate a sweep folder: tables (Parquet and CSV), figures and report.html.

    python -m sweeper.aggregate SWEEP_DIR

Runs at the end of every sweep, and alone over an existing sweep folder (after a resume,
or with a newer sweeper). Reads only the folder (sweeper/reporting/load.py); a record that
cannot be read is left out with a note, never a traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sweeper.record import atomic_write_text
from sweeper.reporting import figures as fg
from sweeper.reporting import report
from sweeper.reporting.findings import all_findings
from sweeper.reporting.sweep_figures import all_figures
from sweeper.reporting.load import AggregateError, read_sweep
from sweeper.reporting.autotune_decisions import decided
from sweeper.reporting.autotune_advice import advice_findings
from sweeper.reporting.autotune_regret import regret_findings, regret_table
from sweeper.reporting.model_code import module_pairs, where_in_model
from sweeper.reporting.notes import all_notes
from sweeper.reporting.roofline import most_to_win, ranking
from sweeper.reporting.overview import SMALL_SWEEP_JOBS, overview
from sweeper.reporting.sweep_tables import records_manifest, write_table
from sweeper.reporting.changes_read import history_changes
from sweeper.reporting.sweeps import compare_builds, earlier_comparison

TABLES_DIR, FIGURES_DIR, REPORT_FILE = "tables", "figures", "report.html"


# The page holds its figures (one file to mail or attach) while it stays under this size;
# a larger one (a sweep of hundreds of jobs) links them in figures/ beside it.
PAGE_MAX_BYTES = 5_000_000


def _check_writable(sweep_dir: Path) -> None:
    """Raise AggregateError, having written nothing, where the sweep folder cannot take its
    tables, figures and report (a read-only copy ended in a traceback half way)."""
    from sweeper.record import write_problem

    why = write_problem(sweep_dir, make=False) if sweep_dir.is_dir() else None  # no folder: read_sweep says it
    if why:
        raise AggregateError(f"{sweep_dir} cannot be written ({why}): the report, tables/ and figures/ "
                             "go into the sweep folder; copy it somewhere you can write and aggregate the copy")


def aggregate(sweep_dir: Path) -> Path:
    """Write tables/, figures/ and report.html into the sweep folder; returns the report.
    The sweep is read once (load.read_sweep) and handed to every step."""
    _check_writable(Path(sweep_dir))
    made_from = records_manifest(Path(sweep_dir))  # the records as they are read: later comparisons check it
    sweep = read_sweep(Path(sweep_dir))
    tdir = sweep.path / TABLES_DIR
    tdir.mkdir(exist_ok=True)
    regret = regret_table(sweep.jobs, sweep.model_modules, sweep.decisions)  # where max-autotune loses, site by site
    for name, df in (("jobs", sweep.jobs), ("categories", sweep.cats), ("kernels", sweep.kernels),
                     ("microbench", sweep.bench), ("modules", sweep.model_modules),
                     ("recoverable", ranking(sweep.recoverable)), ("autotune_decisions", sweep.decisions),
                     ("autotune_regret", regret)):
        write_table(df, tdir / f"{name}.parquet", made_from)
        df.to_csv(tdir / f"{name}.csv", index=False)
    # what follows reads the step's kernels only: the modules' rows (most of a large sweep's) go
    sweep.kernels = sweep.kernels[sweep.kernels["scope"] == "step"].reset_index(drop=True)
    figs = all_figures(sweep.jobs, sweep.cats, sweep.bench, sweep.path / FIGURES_DIR, sweep.model_modules,
                       sweep.recoverable)
    comparison, more = earlier_comparison(sweep)
    history, more_notes = history_changes(sweep)
    many = len(sweep.jobs) > SMALL_SWEEP_JOBS  # the page then shows the flagged pairs' kernels only
    builds = compare_builds(sweep, kernels="flagged" if many else "all") if sweep.jobs["python"].nunique() > 1 else []
    code = (where_in_model(sweep.jobs, sweep.model_modules, sweep.kernels), module_pairs(sweep.jobs, sweep.model_modules))
    found, module_view = all_findings(sweep.jobs, sweep.cats, sweep.kernels, sweep.bench, code,
                                      most_to_win(sweep.jobs, sweep.recoverable),
                                      decided(sweep.jobs, sweep.decisions)
                                      + regret_findings(sweep.jobs, sweep.model_modules, regret)
                                      + advice_findings(sweep.jobs))
    view = report.ReportView(
        figs, sweep.notes + all_notes(sweep.jobs) + more + more_notes, found, module_view, comparison, builds,
        overview(sweep.jobs, sweep.cats, sweep.kernels, sweep.bench, fg.device_word(sweep.jobs), sweep.recoverable),
        history=history)
    page = report.render(sweep, view)
    if len(page.encode()) > PAGE_MAX_BYTES:
        view.embed_figures = False
        page = report.render(sweep, view)
    path = sweep.path / REPORT_FILE
    atomic_write_text(path, page)
    return path


def main(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m sweeper.aggregate", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir", type=Path, help="a folder a sweep wrote (summary.json, numbered job folders)")
    args = ap.parse_args(argv)
    try:
        path = aggregate(args.sweep_dir)
    except AggregateError as e:
        print(f"sweeper.aggregate: {e}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


if __name__ == "__main__":
    from sweeper.command_line import closing_pipe_quietly

    sys.exit(closing_pipe_quietly(main)(sys.argv[1:]))
