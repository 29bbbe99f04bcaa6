"""A comparison of two sweeps in words (`python -m sweeper.history compare`): the rule it
judged by, the jobs that got slower or faster, their kernels, and the files it writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweeper.analysis.module_rollup import modules_said
from sweeper.analysis.regression import CANNOT_JUDGE, CANNOT_JUDGE_NOISE_PCT, FLAGGING, HOST
from sweeper.reporting import sweeps as sw
from sweeper.words import count


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
             f"{len(flagged)} of {count(len(both), 'job')} flagged ({counts}; {changed} changed status)."]
    for side, status in (("new", "status_new"), ("old", "status_old")):
        bad = t[t[status] == sw.UNREADABLE]
        if len(bad):
            lines.append(f"{len(bad)} unreadable in the {side} sweep (counted as a changed status): "
                         + "; ".join(f"{r['label']}: {r['why']}" for _, r in bad.iterrows()))
    unjudged = both[v == CANNOT_JUDGE]
    if len(unjudged):
        lines.append(f"{count(len(unjudged), 'job')} could not be judged: their noise is wider than ±{CANNOT_JUDGE_NOISE_PCT:g}% "
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
