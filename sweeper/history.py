"""Sweeps over time: what got slower since an earlier sweep, and trends.

    python -m sweeper.history compare NEW_SWEEP [OLD_SWEEP] [--kernels] [--fail-on-regression]
    python -m sweeper.history compare SWEEP --between python     # builds side by side in one sweep
    python -m sweeper.history trend OUTPUTS_DIR [--last 10] [--out trend.png]

The history is the complete sweep folders under a folder (any folder with a summary.json
that says the sweep ended on its own, with no job cancelled), ordered by when they
started; a running, interrupted or cancelled sweep is skipped with a one-line note. Jobs
are matched across sweeps by their configuration, not by job number. Nothing is written
into a sweep folder; files are written only where --out says.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sweeper.analysis.regression import DEFAULT_THRESHOLD_PCT
from sweeper.reporting import sweeps as sw
from sweeper.reporting.compare_text import compare_text, write_compare
from sweeper.reporting.load import AggregateError
from sweeper.reporting.trend import trend_figure
from sweeper.words import count

COMPARE_HELP = """Compare NEW_SWEEP with OLD_SWEEP (default: the latest complete sweep that started
before it in NEW_SWEEP's parent folder, as +sweep=nightly lays them out).

Two figures of each job are compared: its compiled step's time and its kernels' time per
step. A figure changed when it moved by at least --threshold percent AND by more than the
noise of both runs together: each run's own (for the step time, its steady loop's mean:
half the interquartile range of the loop's stretches, each timed apart) or, once
3 earlier complete sweeps on the same GPU model have the job, the spread over them. A job
is flagged slower or faster when its kernels' time changed, or its step time changed
with its number of kernel launches; a step time that moved alone is the host's ("host",
not flagged). On a CPU, the step time alone decides. A job whose noise is wider than
±50% (a CPU shared with other work) is "cannot judge", it and its kernels: on a CPU a
compare can show a large change of an idle machine's runs, never a small one of a busy one's. Each row shows both changes, the noise each was held against, the verdict
and why (docs/method.md, "Comparing sweeps"). New and gone jobs are listed apart.
Flagged jobs get a kernel-level diff (--kernels: every job).

With --between python, one sweep that ran several Python environments (python=a,b) is
compared with itself: the jobs of each later build against the same jobs of the first,
each pair's noise its two runs' own, with a kernel-level diff for every pair."""

TREND_HELP = """Draw each job's compiled step time over the last complete sweeps under OUTPUTS_DIR,
by the date each sweep started."""


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m sweeper.history", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="what got slower since an earlier sweep", description=COMPARE_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("new", type=Path, help="the sweep folder to judge")
    c.add_argument("old", type=Path, nargs="?", help="the sweep to hold it against (default: the one before it)")
    c.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT,
                   help="smallest change of the compiled step that can be flagged, %% (default %(default)s)")
    c.add_argument("--kernels", action="store_true", help="a kernel-level diff for every job, not only flagged ones")
    c.add_argument("--top", type=int, default=10, help="kernels shown per job (default %(default)s)")
    c.add_argument("--history", type=int, default=sw.HISTORY_SWEEPS,
                   help="earlier complete sweeps whose spread counts as noise (default %(default)s)")
    c.add_argument("--out", type=Path, help="also write compare_jobs.csv and compare_kernels.csv into this folder")
    c.add_argument("--fail-on-regression", action="store_true",
                   help="exit with code 1 when any job is flagged (slower, faster, or its status or its check against eager changed)")
    c.add_argument("--between", choices=[sw.BUILD_KEY],
                   help="compare the builds of one sweep (python=a,b) with each other, not two sweeps")
    t = sub.add_parser("trend", help="compiled step time over the last sweeps", description=TREND_HELP)
    t.add_argument("outputs", type=Path, help="the folder holding the sweeps (e.g. outputs/nightly)")
    t.add_argument("--last", type=int, default=10, help="how many complete sweeps (default %(default)s)")
    t.add_argument("--out", type=Path, help="the figure's path (default: OUTPUTS_DIR/trend.png)")
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "compare":
            return _compare(args)
        return _trend(args)
    except AggregateError as e:
        print(f"sweeper.history: {e}", file=sys.stderr)
        return 2


def _compare(args) -> int:
    new = args.new.resolve()
    for name, path in (("NEW", args.new), ("OLD", args.old)):
        if path is not None and not path.is_dir():
            print(f"sweeper.history: {name} {path} is not a folder: give a sweep folder (the one with summary.json)",
                  file=sys.stderr)
            return 2
    if args.old is not None and args.old.resolve() == new:
        print(f"sweeper.history: NEW and OLD are the same folder ({new}): a sweep compared with itself shows no "
              "change; give an earlier sweep as OLD, or none to take the one before NEW", file=sys.stderr)
        return 2
    if args.between:
        return _compare_builds(args, new)
    old = args.old
    if old is None:
        old, notes = sw.earlier_sweep(new)
        for n in notes:
            print(f"sweeper.history: {n}", file=sys.stderr)
        if old is None:
            print(f"sweeper.history: no earlier complete sweep beside {new} (under {new.parent}) shares a job "
                  "with it; name one: compare NEW OLD", file=sys.stderr)
            return 2
    cmp = sw.compare_sweeps(new, old.resolve(), args.threshold, "all" if args.kernels else "flagged", args.history)
    print(compare_text(cmp, args.top))
    if args.out:
        for path in write_compare(cmp, args.out):
            print(f"wrote {path}")
    return 1 if args.fail_on_regression and len(cmp.flagged) else 0


def _compare_builds(args, sweep: Path) -> int:
    if args.old is not None:
        print("sweeper.history: --between compares the builds within one sweep: give one sweep folder", file=sys.stderr)
        return 2
    ok, why = sw.sweep_state(sweep)
    if not ok:
        print(f"sweeper.history: {sweep} is not a complete sweep ({why})", file=sys.stderr)
        return 2
    comparisons = sw.compare_builds(sweep, args.threshold)
    if not comparisons:
        print(f"sweeper.history: {sweep} ran one Python environment only; --between {args.between} needs a sweep "
              f"with {args.between}=a,b", file=sys.stderr)
        return 2
    flagged = 0
    for cmp in comparisons:
        print(compare_text(cmp, args.top) + "\n")
        flagged += len(cmp.flagged)
        if args.out and cmp.between:  # compare_builds gives each comparison its pair of builds
            for path in write_compare(cmp, args.out / f"{cmp.between[2]}_vs_{cmp.between[1]}"):
                print(f"wrote {path}")
    return 1 if args.fail_on_regression and flagged else 0


def _trend(args) -> int:
    sweeps, notes = sw.complete_sweeps_under(args.outputs)
    for n in notes:
        print(f"sweeper.history: {n}", file=sys.stderr)
    sweeps = sweeps[-args.last:]
    if not sweeps:
        print(f"sweeper.history: no complete sweep (summary.json, not interrupted) under {args.outputs}", file=sys.stderr)
        return 2
    out, _ = trend_figure(sweeps, args.out or args.outputs / "trend.png")
    print(f"trend of {count(len(sweeps), 'sweep')}: wrote {out}")
    return 0


if __name__ == "__main__":
    from sweeper.command_line import closing_pipe_quietly

    sys.exit(closing_pipe_quietly(main)(sys.argv[1:]))
