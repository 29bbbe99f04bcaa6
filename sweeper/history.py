"""Sweeps over time: what got slower since an earlier sweep, and trends.

    python -m sweeper.history compare NEW_SWEEP [OLD_SWEEP] [--kernels] [--fail-on-regression]
    python -m sweeper.history compare SWEEP --between python     # builds side by side in one sweep
    python -m sweeper.history trend OUTPUTS_DIR [--last 10] [--out trend.png]
    python -m sweeper.history changes OUTPUTS_DIR [--last 30] [--out DIR] [--fail-on-regression]
    python -m sweeper.history confirm NEW OLD [--job LABEL] [--rounds 10] [--fail-on-regression]

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
from sweeper.command_line import positive
from sweeper.reporting import sweeps as sw
from sweeper.reporting.compare_text import compare_text, write_compare
from sweeper.reporting.load import AggregateError
from sweeper.reporting.trend import trend_command
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

CHANGES_HELP = """The change points of the nightly history under ROOT (the last --last complete sweeps,
as trend reads them), first: for each, the first night it holds, what changed (a kernel
family pooled over the jobs that run it, or one job's kernel time, step time, compile time,
peak memory or check against eager), by how much with a 95% interval, the jobs it touches,
the versions that changed between the last good and the first bad night (torch, Triton,
CUDA, driver, sweeper, Python), and the evidence (docs/method.md, "Change points over the
nightly history"). Then what was read, and how often the rule flags a change on nights with
none (A/A), as bench/change_detection.py measured it."""

CONFIRM_HELP = """Run the jobs of NEW and OLD again on this machine, old and new in turn, and say whether
the change holds: each side compiled once in --processes processes of its own (under the
interpreter its job ran under), then --rounds rounds of each side, old-new then new-old,
dealt over its processes, each round the median of --calls calls of the step. Reports the
shift with a 95% interval (the rounds resampled), Mann-Whitney's p, Cliff's delta and how
far one side's own processes lie apart; confirmed when p < 0.01, the interval excludes no
change, and the shift is 1% or more and beyond that spread (docs/method.md, "Confirming a
change").
NEW and OLD: two sweep folders (the jobs a compare flags, or --job), or two job folders
(two settings of one sweep: confirm SWEEP/1 SWEEP/0). On a GPU both sides share it: run
it where no sweep is running."""

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
    g = sub.add_parser("changes", help="change points over the nightly history", description=CHANGES_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("root", type=Path, help="the folder holding the nights (e.g. outputs/nightly), as trend reads it")
    g.add_argument("--last", type=positive, default=30, help="how many complete nights (default %(default)s)")
    g.add_argument("--top", type=positive, default=20, help="changes listed (default %(default)s)")
    g.add_argument("--out", type=Path, help="also write changes.csv into this folder")
    g.add_argument("--fail-on-regression", action="store_true",
                   help="exit with code 1 when a change to slower, larger or failing starts within the last "
                        "6 nights (the test's window)")
    f = sub.add_parser("confirm", help="re-run flagged jobs old and new in turn, and judge the shift",
                       description=CONFIRM_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("new", type=Path, help="the new sweep folder, or one job's folder (with result.json)")
    f.add_argument("old", type=Path, help="the old sweep folder, or one job's folder")
    f.add_argument("--job", action="append", help="a job to confirm (its label, or part of its key); repeat for more; "
                                                  "default: those a compare of NEW with OLD flags")
    f.add_argument("--rounds", type=int, default=10, help="rounds a side, taken in turn (default %(default)s)")
    f.add_argument("--processes", type=int, default=2,
                   help="processes a side, the rounds dealt over them: a shift within one side's own processes' "
                        "spread is not confirmed (default %(default)s)")
    f.add_argument("--calls", type=positive, help="calls of the step a round (default: the job's measure.timed_steps)")
    f.add_argument("--out", type=Path, help="the work folders and confirm.csv go here (default: a temporary folder)")
    f.add_argument("--python", action="append", default=[], metavar="PATH",
                   help="an interpreter a side may run under besides this one (a record names the interpreter its "
                        "job ran under; confirm runs only those you name); repeat for more")
    f.add_argument("--fail-on-regression", action="store_true", help="exit with code 1 when a job is confirmed slower")
    t = sub.add_parser("trend", help="compiled step time over the last sweeps", description=TREND_HELP)
    t.add_argument("outputs", type=Path, help="the folder holding the sweeps (e.g. outputs/nightly)")
    t.add_argument("--last", type=positive, default=10, help="how many complete sweeps (default %(default)s)")
    t.add_argument("--out", type=Path, help="the figure's path (default: OUTPUTS_DIR/trend.png)")
    return ap


def _out_problem(args) -> str | None:
    """Why --out cannot be written, asked before any analysis (a traceback after minutes of
    it helped nobody); None where it can."""
    from sweeper.record import write_problem

    if (out := getattr(args, "out", None)) is None:
        return None
    why = write_problem(Path(out).parent if args.cmd == "trend" else Path(out))
    return f"--out {out} cannot be written ({why}): give a folder you can write" if why else None


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    problem = _out_problem(args)
    if problem:
        print(f"sweeper.history: {problem}", file=sys.stderr)
        return 2
    try:
        if args.cmd == "compare":
            return _compare(args)
        if args.cmd == "changes":
            return _changes(args)
        if args.cmd == "confirm":
            return _confirm(args)
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


def _changes(args) -> int:
    from sweeper.analysis.changes import VERDICTS, WINDOW
    from sweeper.reporting.changes_read import read_changes
    from sweeper.reporting.changes_text import changes_frame, changes_text

    if not args.root.is_dir():
        print(f"sweeper.history: {args.root} is not a folder: give the folder that holds the nights "
              "(e.g. outputs/nightly)", file=sys.stderr)
        return 2
    got = read_changes(args.root, args.last)
    for n in got.notes:
        print(f"sweeper.history: {n}", file=sys.stderr)
    if not got.sweeps:
        print(f"sweeper.history: no complete sweep (summary.json, not interrupted) under {args.root}", file=sys.stderr)
        return 2
    print(changes_text(got, args.top))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        changes_frame(got).to_csv(args.out / "changes.csv", index=False)
        print(f"wrote {args.out / 'changes.csv'}")
    recent = [c for c in got.changes if c.night >= len(got.nights) - WINDOW
              and (c.level in VERDICTS or c.size_pct > 0)]
    return 1 if args.fail_on_regression and recent else 0


def _confirm(args) -> int:
    from sweeper.analysis.confirm_stats import MIN_ROUNDS
    from sweeper.confirm import ConfirmError, Interrupted, confirm_lines, run_confirm, write_confirm_csv

    for name, path in (("NEW", args.new), ("OLD", args.old)):
        if not path.is_dir():
            print(f"sweeper.history: {name} {path} is not a folder: give a sweep folder or a job folder (with "
                  "result.json)", file=sys.stderr)
            return 2
    if args.new.resolve() == args.old.resolve() and not args.job:
        print(f"sweeper.history: NEW and OLD are the same folder ({args.new}), and no --job: a sweep against itself "
              "flags nothing to confirm; give the night to judge and the one to hold it against, or --job for an "
              "A/A run of one job", file=sys.stderr)
        return 2
    if args.processes < 1:
        print(f"sweeper.history: --processes {args.processes}: at least 1", file=sys.stderr)
        return 2
    if args.rounds < MIN_ROUNDS:
        print(f"sweeper.history: --rounds {args.rounds}: at least {MIN_ROUNDS} are needed for a verdict",
              file=sys.stderr)
        return 2
    try:
        results, notes = run_confirm(args.new, args.old, args.job, args.rounds, args.calls, args.out, args.processes,
                                     args.python)
    except ConfirmError as e:
        print(f"sweeper.history: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before any side started (reading the sweeps): nothing to keep
        print("sweeper.history: interrupted (Ctrl-C) before any job ran", file=sys.stderr)
        return 130
    except Interrupted as stop:  # Ctrl-C: what was done is kept and written, and it ends now
        results, notes = stop.results, ["interrupted (Ctrl-C): the rounds taken are kept, no verdict on the pair "
                                        "in hand"]
        interrupted = True
    else:
        interrupted = False
    for n in notes:
        print(f"sweeper.history: {n}", file=sys.stderr)
    print(f"# confirmation of {count(len(results), 'job')}: {args.new} against {args.old}")
    print("\n".join(confirm_lines(results)) if results else "nothing to confirm")
    if args.out:
        print(f"wrote {write_confirm_csv(results, args.out)}")
    if interrupted:
        return 130  # as a shell reports Ctrl-C
    failed = [r for r in results if r.confirmed is None]
    slower = [r for r in results if r.confirmed is not None and r.confirmed.verdict == "slower"]
    if args.fail_on_regression and slower:
        return 1
    return 2 if failed and not [r for r in results if r.confirmed] else 0


def _trend(args) -> int:
    return trend_command(args.outputs, args.last, args.out)


if __name__ == "__main__":
    from sweeper.command_line import closing_pipe_quietly

    sys.exit(closing_pipe_quietly(main)(sys.argv[1:]))
