"""The nightly history's change points, read from the sweeps' tables and said in words
(`python -m sweeper.history changes`, the nightly report's "What changed"; the analysis is
sweeper/analysis/changes.py)."""

from __future__ import annotations

import math

import pandas as pd

from sweeper.analysis import causes as ca
from sweeper.analysis import changes as ch
from sweeper.analysis.categories import category_label
from sweeper.reporting.changes_read import MIN_NIGHTS, Changes
from sweeper.words import count


def _name(c: ch.Change, labels: dict[str, str]) -> str:
    if c.level == "category":
        return f"{category_label(c.name, 'device').split(' (')[0]} (every kernel of the category)"
    if c.level == "family":
        return f"kernel family {c.name}"
    what = {"kernels": "kernel time a step", "step": "step time", "compile": "compile time", "memory": "peak memory",
            "accuracy": "check against eager", "status": "status"}[c.level]
    return f"{labels.get(c.name, c.name)}: {what}"


def change_line(c: ch.Change, got: Changes) -> str:
    """One change in one line: where it starts, what, how much, the jobs, the versions that
    changed, the evidence."""
    labels = got.history.labels
    night = got.nights[c.night] if c.night < len(got.nights) else str(c.night)
    before = got.nights[c.night - 1] if 0 < c.night <= len(got.nights) else "?"
    if c.level == "accuracy":
        text = f"{_name(c, labels)} fails from {night} (passed on {before})"
    elif c.level == "status":
        text = f"{labels.get(c.name, c.name)}: {c.evidence} on {night} (ok on {before})"
    elif c.drift_pct == c.drift_pct:
        text = f"{_name(c, labels)}: {drift_words(c, got)}"
    else:
        text = (f"{_name(c, labels)}: {c.direction} by {abs(c.size_pct):.1f}% (95% CI {c.ci_pct[0]:+.1f} to "
                f"{c.ci_pct[1]:+.1f}%) from {night} (the last night before it: {before})")
    if c.level in ("category", "family"):
        jobs = [labels.get(j, j) for j in c.jobs]
        est = ca.moved_estimate(c)
        text += (f"; of the {c.jobs_running} jobs that run it about {est:.0f} moved (mixture estimate), "
                 if est == est else f"; of the {c.jobs_running} jobs that run it ")
        text += f"{c.significant} significant alone; named (more likely moved than not): " + ", ".join(jobs[:6]) + \
            (f" and {len(jobs) - 6} more" if len(jobs) > 6 else "")
        if c.modules:
            text += f"; modules: {', '.join(c.modules[:3])}"
    versions = versions_near(got.history, c.night, c.night)
    text += ("; versions that changed: " + ", ".join(versions) if versions
             else "; no version changed within a night of it")
    if c.level not in ch.VERDICTS:
        text += f"; evidence: {c.evidence}; q={c.q_value:.2g}"
    return text


SUB_LISTED = 8  # changes listed under a cause


def _kernels_kind(k: ca.Cause, h: ch.History) -> str:
    cats: list[str] = []
    for c in k.changes:
        cat = c.name if c.level == "category" else h.family_category.get(c.name) if c.level == "family" else None
        if cat is not None:
            label = category_label(cat, "device").split(" (")[0]
            if label not in cats:
                cats.append(label)
    if not cats:
        return "kernel time"
    return f"{cats[0]} kernels" if len(cats) == 1 else f"kernels of {len(cats)} categories ({', '.join(cats[:3])})"


_JOB_WHAT = {"kernels": "kernel time", "step": "step time", "compile": "compile time", "memory": "peak memory"}


def versions_near(h: ch.History, first: int, last: int) -> list[str]:
    """The versions that changed between consecutive nights from the night before `first`
    (less one more: a located night can be one late) to the night after `last`, each with the
    night it first shows."""
    out = []
    for t in range(max(1, first - 1), min(len(h.versions) - 1, last + 1) + 1):
        for name, (a, b) in ch.versions_between(h, t).items():
            out.append(f"{name} {a} -> {b} ({'at' if first <= t <= last else 'near'} night {t + 1})")
    return out


def drift_words(c: ch.Change, got: Changes) -> str:
    """A drift in words: its rate a night, over which nights, and in all."""
    first = got.nights[c.night] if c.night < len(got.nights) else str(c.night)
    return (f"drifts {c.drift_pct:+.2f}% a night from {first} on ({c.size_pct:+.1f}% in all): a trend, not a step "
            "(one line for the whole drift)")


def cause_line(k: ca.Cause, got: Changes) -> str:
    """A cause in one line (at most about 200 characters): the night, what moved, how much,
    how many families and jobs, the evidence."""
    h, lead = got.history, k.lead
    night = got.nights[k.night] if k.night < len(got.nights) else str(k.night)
    if lead.level == "accuracy":
        return f"{night}: the check against eager fails in {count(len(k.jobs), 'job')} from this night"
    if lead.level == "status":
        words = sorted({c.evidence for c in k.of("status")})
        return (f"{night}: {count(len(k.of('status')), 'job')} {' or '.join(words)} that ran ok the night before: "
                + ", ".join(h.labels.get(c.name, c.name) for c in k.of("status")[:3])
                + (f" and {len(k.of('status')) - 3} more" if len(k.of("status")) > 3 else ""))[:200]
    fams = k.of("family")
    if lead.drift_pct == lead.drift_pct:
        return f"{_name(lead, h.labels)}: {drift_words(lead, got)}; q={lead.q_value:.1g}"
    if lead.level in ca.POOLED:
        what = _kernels_kind(k, h)
        est = ca.moved_estimate(lead)
        moved = (f"about {est:.0f} of {lead.jobs_running} jobs moved (mixture), {lead.significant} significant alone"
                 if est == est else f"{len(lead.jobs)} of {lead.jobs_running} jobs moved")
        size = f"{lead.direction} by {abs(lead.size_pct):.1f}% (95% CI {lead.ci_pct[0]:+.1f} to {lead.ci_pct[1]:+.1f}%)"
    else:
        what = _JOB_WHAT.get(lead.level, lead.level)
        same = [c for c in k.changes if c.level == lead.level]
        sizes = sorted(abs(c.size_pct) for c in same)
        size = (f"{lead.direction} by {sizes[0]:.1f}%" if len(sizes) == 1 else
                f"{lead.direction} by {sizes[0]:.1f} to {sizes[-1]:.1f}% (median {sizes[len(sizes) // 2]:.1f}%)")
        moved = f"in {count(len(same), 'job')}"
    parts = [f"{night}: {what} {size}", moved]
    if fams:
        parts.append(count(len(fams), "family", "families"))
    if len(k.jobs) > len(lead.jobs if lead.level in ca.POOLED else (lead.name,)):
        parts.append(f"{count(len(k.jobs), 'job')} in all")
    parts.append(f"q={lead.q_value:.1g}")
    return "; ".join(parts)


def member_line(c: ch.Change, got: Changes) -> str:
    """One change under its cause: what, how much, its jobs, its q-value (the night, the
    versions and the evidence are the cause's line's, and changes.csv's)."""
    labels = got.history.labels
    if c.level == "accuracy":
        return f"{_name(c, labels)} fails (passed the night before)"
    if c.level == "status":
        return f"{labels.get(c.name, c.name)}: {c.evidence} (ok the night before)"
    night = got.nights[c.night] if c.night < len(got.nights) else str(c.night)
    if c.drift_pct == c.drift_pct:
        text = f"{_name(c, labels)}: {drift_words(c, got)}"
    else:
        text = (f"{_name(c, labels)}: {c.direction} by {abs(c.size_pct):.1f}% (95% CI {c.ci_pct[0]:+.1f} to "
                f"{c.ci_pct[1]:+.1f}%) from {night}")
    if c.level in ca.POOLED:
        est = ca.moved_estimate(c)
        text += (f"; about {est:.0f} of {c.jobs_running} jobs moved, " if est == est
                 else f"; of {c.jobs_running} jobs, ") + f"{c.significant} significant alone"
        if c.modules:
            text += f"; modules: {', '.join(c.modules[:3])}"
    return text + f"; q={c.q_value:.1g}"


def cause_details(k: ca.Cause, got: Changes) -> list[str]:
    """Under a cause's line: the versions that changed near it, then its changes one a line
    (the lead first)."""
    versions = versions_near(got.history, k.night, k.last_night)
    out = ["versions that changed: " + ", ".join(versions) if versions else
           "no version changed within a night of it"]
    out += [f"- {member_line(c, got)}" for c in k.changes[:SUB_LISTED]]
    if len(k.changes) > SUB_LISTED:
        out.append(f"- ... and {len(k.changes) - SUB_LISTED} more of this cause (--out writes them all)")
    return out


def machine_lines(got: Changes) -> list[str]:
    """The nights the machine moved every job (sweeper/analysis/night_noise.py), one line
    each, and the kernels judged in their own config: what was taken out before the tests."""
    cleaned = got.history.cleaned
    if cleaned is None:
        return []
    out = []
    for m in cleaned.machine:
        night = got.nights[m.night] if m.night < len(got.nights) else str(m.night)
        way = "slower" if m.size_pct > 0 else "faster"
        step = f", the step {m.step_pct:+.1f}%" if m.step_pct == m.step_pct else ""
        last = (" (the last night: a change that stays shows as one from the next night on)"
                if m.night == len(got.nights) - 1 else "")
        out.append(f"{night}: every job's kernels {abs(m.size_pct):.1f}% {way} ({m.agree} of {m.jobs} jobs moved "
                   f"that way{step}): the machine, not the kernels{last}" + (f"; {m.why}" if m.why else ""))
    for a, b in cleaned.episodes:
        out.append(f"{_name(a, got.history.labels)}: {a.size_pct:+.1f}% at {got.nights[a.night]} and back "
                   f"({b.size_pct:+.1f}%) at {got.nights[b.night]}: an episode that passed, not a change")
    if cleaned.two_configs:
        fams = sorted({f for f, _ in cleaned.two_configs})
        out.append(f"{count(len(cleaned.two_configs), 'kernel family of a job', 'kernel families of a job')} "
                   f"({count(len(fams), 'family', 'families')}) ran in two configs from night to night: each night "
                   f"judged against its own config's level (e.g. {fams[0]})")
    return out


def changes_text(got: Changes, top: int = 20) -> str:
    """The causes first, each one line with the changes that make it up under it, then what
    was read."""
    lines = [f"# change points over {count(len(got.nights), 'night')} under "
             f"{got.sweeps[0].parent if got.sweeps else '?'}"
             + (f" ({got.nights[0]} to {got.nights[-1]})" if got.nights else "")]
    if len(got.nights) < MIN_NIGHTS:
        lines.append(f"too few complete nights to tell a change point ({len(got.nights)}; at least {MIN_NIGHTS})")
        return "\n".join(lines)
    causes = got.causes
    lines.append(f"{count(len(causes), 'change')} ({count(len(got.changes), 'series', 'series')} moved, "
                 f"grouped by night and jobs); {got.false_rate}")
    for k in causes[:top]:
        lines.append(f"- {cause_line(k, got)}")
        lines += [f"  {sub}" for sub in cause_details(k, got)]
    if len(causes) > top:
        lines.append(f"- ... and {len(causes) - top} more")
    machine = machine_lines(got)
    if machine:
        lines += ["", "Taken out before the tests (sweeper/analysis/night_noise.py):"] + [f"- {m}" for m in machine]
    h = got.history
    lines.append("")
    lines.append(f"Read: {count(len(h.jobs), 'job')}, "
                 f"{count(sum(1 for k in h.pooled if k[0] == 'family'), 'kernel family', 'kernel families')} and "
                 f"{count(sum(1 for k in h.pooled if k[0] == 'category'), 'category', 'categories')} pooled over the "
                 f"jobs that run them, {count(len(h.per_job), 'job series', 'job series')} (kernel time, step time "
                 f"where the GPU was at least {ch.STEP_BUSY_PCT:.0f}% busy, compile time, peak memory), each job's "
                 "check against eager (docs/method.md, \"Change points over the nightly history\")")
    lines += [f"note: {n}" for n in got.notes]
    return "\n".join(lines)


def changes_frame(got: Changes) -> pd.DataFrame:
    """The changes as a table (for --out and the report)."""
    rows = []
    cause_of = {id(c): i for i, k in enumerate(got.causes, 1) for c in k.changes}
    for c in got.changes:
        rows.append({"cause": cause_of.get(id(c)), "level": c.level, "name": c.name, "night": got.nights[c.night], "direction": c.direction,
                     "size_pct": c.size_pct, "ci_low_pct": c.ci_pct[0], "ci_high_pct": c.ci_pct[1],
                     "jobs": "; ".join(got.history.labels.get(j, j) for j in c.jobs), "jobs_running": c.jobs_running,
                     "p_value": c.p_value, "q_value": c.q_value, "evidence": c.evidence,
                     "versions": "; ".join(versions_near(got.history, c.night, c.night))})
    return pd.DataFrame(rows, columns=["cause", "level", "name", "night", "direction", "size_pct", "ci_low_pct", "ci_high_pct",
                                       "jobs", "jobs_running", "p_value", "q_value", "evidence", "versions"])


def is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)
