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

import pandas as pd

from sweeper.analysis.module_rollup import modules_said
from sweeper.analysis.regression import CANNOT_JUDGE, CANNOT_JUDGE_NOISE_PCT, DEFAULT_THRESHOLD_PCT, FLAGGING, HOST, wall_ms
from sweeper.reporting import sweeps as sw
from sweeper.reporting.load import AggregateError
from sweeper.reporting.tables import distinct_labels

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


def _f(x, fmt="{:+.1f}") -> str:
    return "–" if x is None or pd.isna(x) else fmt.format(x)


def rule_line(jobs: pd.DataFrame, threshold_pct: float, hist: str) -> str:
    """What flags a job, for the devices the compared jobs ran on: a GPU job by its kernels'
    time (or its step time with its launches), a CPU job by its step time, the host being
    its device (sweeper/analysis/regression.py)."""
    cpu = jobs["gpu_old"].isna() & jobs["gpu_new"].isna()  # as regression.compare_jobs tells a CPU job
    noise = f"by at least {threshold_pct:g}% beyond the noise of both runs: each run's own, {hist} (docs/method.md)"
    gpu_rule = "the kernels' time per step, or the step time with the launches per step, changed"
    cpu_rule = ("the compiled step's time changed (the host is a CPU job's device; a change its eager step "
                "shares is the host's speed, not judged)")
    if len(cpu) and cpu.all():
        return f"flagged: {cpu_rule}, {noise}"
    if len(cpu) and cpu.any():
        return f"flagged: on a GPU, {gpu_rule}; on a CPU, {cpu_rule}; {noise}"
    return f"flagged: {gpu_rule} {noise}"


def _every_job_lines(both: pd.DataFrame) -> list[str]:
    """The compare's table of every job judged in both sweeps."""
    lines = ["", "## Every job", "",
             "step ms: the compiled step's mean over its steady loop (the jobs table's steady_step_ms, the report's "
             "'loop ms'); the report's 'compiled ms' is the median of the timed steps, a shorter measure",
             "",
             "| job | loop step ms old | loop step ms new | change % | noise ±% | kernel ms old | kernel ms new | change % "
             "| noise ±% | verdict | why | busy % old -> new |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in both.iterrows():
        lines.append(f"| {r['label']} | {_f(r['step_ms_old'], '{:.2f}')} | {_f(r['step_ms_new'], '{:.2f}')} "
                     f"| {_f(r['step_change_pct'])} | {_f(r['noise_pct'], '{:.1f}')} "
                     f"| {_f(r['device_ms_old'], '{:.3f}')} | {_f(r['device_ms_new'], '{:.3f}')} "
                     f"| {_f(r['device_change_pct'])} | {_f(r['device_noise_pct'], '{:.1f}')} | {r['verdict'] or '–'} "
                     f"| {r['why'] or '–'} | {_f(r['busy_pct_old'], '{:.1f}')} -> {_f(r['busy_pct_new'], '{:.1f}')} |")
    return lines


def compare_text(cmp: sw.Comparison, top: int = 10) -> str:
    """The compare as text, the answer first: the rule, the verdict (how many jobs flagged,
    judged, not judged, new, gone), the flagged jobs one a line, each flagged job's kernels
    that moved; then every job's row; then, with --kernels, the other jobs' kernels."""
    t = cmp.jobs
    hist = (f"and the spread over the {cmp.history_sweeps} complete sweeps up to the old one"
            if cmp.history_sweeps >= 3 else "(fewer than 3 earlier complete sweeps: no history spread yet)")
    if cmp.between:  # builds side by side in one sweep: no history between them
        hist = "each pair's two runs in this sweep"
    title = (f"# {cmp.new.path}: {cmp.between[0]}={cmp.between[2]} against {cmp.between[0]}={cmp.between[1]}"
             if cmp.between else f"# {cmp.new.path} against {cmp.old.path}")
    both = t[t["status_old"].notna() & t["status_new"].notna()]
    flagged = cmp.flagged
    v = both["verdict"]
    counts = ", ".join(f"{int((v == k).sum())} {k}" for k in (*FLAGGING, HOST, "within noise", "unchanged", CANNOT_JUDGE))
    changed = int(v.str.startswith("status ").sum())
    lines = [title, rule_line(t, cmp.threshold_pct, hist), "",
             f"{len(flagged)} of {len(both)} jobs flagged ({counts}; {changed} changed status)."]
    for side, status in (("new", "status_new"), ("old", "status_old")):
        bad = t[t[status] == sw.UNREADABLE]
        if len(bad):
            lines.append(f"{len(bad)} unreadable in the {side} sweep (counted as a changed status): "
                         + "; ".join(f"{r['label']}: {r['why']}" for _, r in bad.iterrows()))
    unjudged = both[v == CANNOT_JUDGE]
    if len(unjudged):
        lines.append(f"{len(unjudged)} jobs could not be judged: their noise is wider than ±{CANNOT_JUDGE_NOISE_PCT:g}% "
                     f"({', '.join(f'{lab} ±{n:.0f}%' for lab, n in zip(unjudged['label'], unjudged['noise_pct']))}); "
                     "neither a change nor its absence can be read from them, nor from their kernels")
    for what, name in (("new job", "new (not in the old sweep)"), ("gone", "gone (not in the new sweep)")):
        labels = list(t.loc[t["verdict"] == what, "label"])
        if labels:
            lines.append(f"{len(labels)} {name}: {', '.join(labels)}")
    if len(flagged):
        lines += ["", "## Flagged", ""]
        for _, r in flagged.sort_values("step_change_pct", key=lambda c: -c.abs()).iterrows():
            lines.append(f"- {r['label']}: {r['verdict']} ({r['why'] or 'status'}), step {_f(r['step_change_pct'])}%, "
                         f"kernels {_f(r['device_change_pct'])}%")
    flagged_keys = set(flagged["key"])
    details = [(k, d) for k, d in cmp.details.items() if k in flagged_keys]
    details += [(k, d) for k, d in cmp.details.items() if k not in flagged_keys]
    for key, d in details[:len([k for k, _ in details if k in flagged_keys])]:
        lines += _kernel_lines(t, key, d, top)
    lines += _every_job_lines(both)
    others = [(k, d) for k, d in details if k not in flagged_keys]
    if others:
        lines += ["", "## The other jobs' kernels (--kernels)"]
        for key, d in others:
            lines += _kernel_lines(t, key, d, top)
    return "\n".join(lines)


def _kernel_lines(t: pd.DataFrame, key: str, d: sw.JobDetail, top: int) -> list[str]:
    """One job's kernel-level section: its figures, category shares and the kernels that moved."""
    row = t[t["key"] == key].iloc[0]
    lines = ["", f"### {d.label}: {row['verdict']} ({row['why'] or 'no change'}): step {_f(row['step_change_pct'])}% "
                 f"(noise ±{_f(row['noise_pct'], '{:.1f}')}%), kernels {_f(row['device_change_pct'])}% "
                 f"(noise ±{_f(row['device_noise_pct'], '{:.1f}')}%)"]
    largest = row["largest_share_change"]
    if isinstance(largest, str):
        lines.append(f"largest category share change: {largest} {_f(row['largest_share_change_pp'])} pp")
    cats = sorted(set(d.shares_old.index) | set(d.shares_new.index))
    lines.append("category shares %: " + ", ".join(
        f"{c} {_f(d.shares_old.get(c), '{:.1f}')} -> {_f(d.shares_new.get(c), '{:.1f}')}" for c in cats))
    lines.append("; ".join(f"{name} {_f(a, '{:.1f}')} -> {_f(b, '{:.1f}')}" for name, (a, b) in d.figures.items()))
    if row["verdict"] == CANNOT_JUDGE:
        return lines + [f"kernels: not judged either ({row['why']})"]
    if d.kernels.empty:
        return lines + ["kernels: none moved by the threshold and the job's noise (or none above 1% of the step)"]
    code = "model_modules" in d.kernels and bool(d.kernels["model_modules"].notna().any())
    lines += ["| kernel | category | ms old | ms new | change ms | change % | what |" + (" model code |" if code else ""),
              "|---|---|---|---|---|---|---|" + ("---|" if code else "")]
    for _, k in d.kernels.head(top).iterrows():
        lines.append(f"| {k['kernel'][:90]} | {k['category']} | {_f(k['device_ms_old'], '{:.3f}')} | "
                     f"{_f(k['device_ms_new'], '{:.3f}')} | {_f(k['change_ms'], '{:+.3f}')} | "
                     f"{_f(k['change_pct'])} | {k['change']} |" + (f" {modules_said(k['model_modules']) or '–'} |" if code else ""))
    if len(d.kernels) > top:
        lines.append(f"... and {len(d.kernels) - top} more (--top)")
    return lines


def write_compare(cmp: sw.Comparison, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "compare_jobs.csv"]
    cmp.jobs.to_csv(written[0], index=False)
    if cmp.details:
        unjudged = set(cmp.jobs.loc[cmp.jobs["verdict"] == CANNOT_JUDGE, "key"])
        rows = [k.assign(job=d.label) for key, d in cmp.details.items() if key not in unjudged for k in [d.kernels]]
        written.append(out / "compare_kernels.csv")
        (pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()).to_csv(written[1], index=False)
    return written


def date_limits(times: list) -> tuple | None:
    """The time axis's ends: the sweeps' span with 5% either side, and at least an hour
    either side. Left to matplotlib, one sweep (or several within seconds) drew a 2025-2029
    axis with overlapping labels."""
    if not times:
        return None
    lo, hi = min(times), max(times)
    pad = max((hi - lo) * 0.05, pd.Timedelta(hours=1))
    return lo - pad, hi + pad


TREND_LINES = 10  # jobs drawn as lines of their own; more: the rest as a band


def trend_data(sweeps: list[Path]) -> pd.DataFrame:
    """Each finished job's compiled step (steady loop) in each sweep: sweep, started, key,
    label, step_ms; read from the sweeps' tables (sweeps.sweep_tables)."""
    frames = []
    for s in sweeps:
        t = sw.sweep_tables(s)
        jobs = t.jobs[t.jobs["status"] == "ok"]
        frames.append(jobs.assign(sweep=s.name, started=pd.to_datetime(t.started_at, errors="coerce"),
                                  step_ms=[wall_ms(r) for _, r in jobs.iterrows()])[
            ["sweep", "started", "key", "label", "step_ms"]])
    data = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=["sweep", "started", "key", "label", "step_ms"])
    # one point a job and sweep: jobs of one configuration (seeds) stand as the first, as in a compare
    data = data.drop_duplicates(["sweep", "key"]).reset_index(drop=True)
    data["label"] = data["label"].str.replace(r" #\d+$", "", regex=True)  # a seed's number names no job across sweeps
    names = distinct_labels({k: (k, lab) for k, lab in data.drop_duplicates("key")[["key", "label"]].values})
    data["label"] = data["key"].map(names)
    return data


TREND_MIN_CHANGE = 0.02  # a job whose last step is within 2% of its first stays in the band


def most_changed(data: pd.DataFrame, n: int) -> list[str]:
    """The n jobs (labels) whose last step moved most from their first, relatively, those
    that moved TREND_MIN_CHANGE or more."""
    ordered = data.sort_values("started").groupby("label")["step_ms"]
    change = (ordered.last() / ordered.first() - 1).abs().dropna()
    return list(change[change >= TREND_MIN_CHANGE].sort_values(ascending=False).index[:n])


def last_flagged(sweeps: list[Path], data: pd.DataFrame) -> list[str]:
    """The trend's labels of the jobs that the last sweep's compare with the one before it
    flags (sweeps.compare_sweeps, read from their tables); none with fewer than two sweeps."""
    if len(sweeps) < 2:
        return []
    try:
        cmp = sw.compare_sweeps(sweeps[-1], sweeps[-2], kernels="none")
    except AggregateError:
        return []
    label_of = dict(zip(data["key"], data["label"]))
    return [label_of[k] for k in cmp.flagged["key"] if k in label_of]


def trend_figure(sweeps: list[Path], out: Path) -> tuple[Path, pd.DataFrame]:
    """Each job's compiled step over the sweeps. Up to TREND_LINES jobs, a line each in
    milliseconds; more, each job's step relative to its first sweep shown: the
    middle 80% of jobs as a band with their median, and as lines of their own the jobs the
    last compare flags and the TREND_LINES that moved most (last against first)."""
    import matplotlib.dates as mdates

    from sweeper.reporting.figures import plt, save  # matplotlib, set up for files only

    data = trend_data(sweeps)
    many = data["label"].nunique() > TREND_LINES
    fig, ax = plt.subplots(figsize=(11, 5.5))
    if many:
        data = data.sort_values("started")
        rel = data.assign(ratio=data["step_ms"] / data.groupby("label")["step_ms"].transform("first"))
        band = rel.groupby("started")["ratio"].quantile([0.1, 0.5, 0.9]).unstack()
        ax.fill_between(band.index, band[0.1], band[0.9], color="0.85", label=f"middle 80% of {rel['label'].nunique()} jobs")
        ax.plot(band.index, band[0.5], color="0.4", linewidth=1.5, label="their median")
        flagged = last_flagged(sweeps, data)
        lines = list(dict.fromkeys(flagged + most_changed(data, TREND_LINES)))[:max(TREND_LINES, len(flagged))]
        for label in lines:
            g = rel[rel["label"] == label].sort_values("started")
            ax.plot(g["started"], g["ratio"], marker="o", markersize=3,
                    label=f"{label} (flagged)" if label in flagged else label)
        ax.axhline(1, color="0.5", linewidth=0.8, linestyle="--")
        ax.set_ylabel("compiled step against the job's first sweep shown (1 = unchanged)")
    else:
        for label, g in data.sort_values("started").groupby("label"):
            ax.plot(g["started"], g["step_ms"], marker="o", label=label)
        ax.set_ylabel("compiled step, steady loop (ms)")
        ax.set_ylim(bottom=0)
    limits = date_limits(list(data["started"].dropna()))
    if limits is not None:
        ax.set_xlim(*limits)
    locator = mdates.AutoDateLocator(maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("sweep started")
    what = "compiled step time" + (f"\nlines: the jobs the last compare flagged, and those that moved "
                                   f"{TREND_MIN_CHANGE:.0%} or more (at most {TREND_LINES}); the rest as a band"
                                   if many else "")
    over = "of the last complete sweep" if len(sweeps) == 1 else f"over the last {len(sweeps)} complete sweeps"
    ax.set_title(what.replace("\n", f" {over}\n", 1) if many else f"{what} {over}", fontsize=10)
    if len(data):
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1))
    return save(fig, out), data


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
                   help="exit with code 1 when any job is flagged (slower, faster, or its status changed)")
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
    print(f"trend of {len(sweeps)} sweeps: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
