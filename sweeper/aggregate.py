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
from sweeper.reporting import report, tables
from sweeper.reporting.findings import all_findings
from sweeper.reporting.load import AggregateError, load_sweep
from sweeper.reporting.notes import all_notes
from sweeper.reporting.sweeps import compare_builds, earlier_comparison

TABLES_DIR, FIGURES_DIR, REPORT_FILE = "tables", "figures", "report.html"


def aggregate(sweep_dir: Path) -> Path:
    """Write tables/, figures/ and report.html into the sweep folder; returns the report."""
    sweep_dir = Path(sweep_dir).resolve()
    summary, records, notes = load_sweep(sweep_dir)
    recs = [records[n] for n in sorted(records)]
    jobs, cats, kernels = tables.jobs_table(recs), tables.categories_table(recs), tables.kernels_table(recs)
    bench = tables.microbench_table(recs)
    tdir = sweep_dir / TABLES_DIR
    tdir.mkdir(exist_ok=True)
    for name, df in (("jobs", jobs), ("categories", cats), ("kernels", kernels), ("microbench", bench)):
        df.to_parquet(tdir / f"{name}.parquet", index=False)
        df.to_csv(tdir / f"{name}.csv", index=False)
    figs = fg.all_figures(jobs, cats, bench, sweep_dir / FIGURES_DIR)
    notes = notes + all_notes(jobs)
    comparison, more = earlier_comparison(sweep_dir)
    builds = compare_builds(sweep_dir) if jobs["python"].nunique() > 1 else []
    found, module_view = all_findings(jobs, cats, kernels, bench)
    page = report.render(sweep_dir, summary, records, jobs, kernels, figs, notes + more, comparison, builds,
                         found, module_view)
    path = sweep_dir / REPORT_FILE
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
    sys.exit(main(sys.argv[1:]))
