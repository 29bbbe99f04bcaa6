"""The report's sections that compare: what changed since the earlier sweep (first screen), the
builds compared within the sweep (python=a,b), and the comparison in full (pure)."""

from __future__ import annotations

from typing import Any, Mapping

import pandas as pd

from sweeper.reporting.figures import device_word
from sweeper.reporting.html_parts import esc, fmt_num, fold_close, fold_open, short
from sweeper.words import count


def changed_section(cmp, history=None) -> list[str]:
    """The nightly's first screen: what changed against the earlier sweep of the same grid;
    where the change points (`history`, above it) found this night the machine's, said
    first, so the flags under it read as the machine's."""
    t = cmp.jobs
    both = t[t["status_old"].notna() & t["status_new"].notna()]
    flagged = cmp.flagged
    unjudged = both[both["verdict"] == "cannot judge"]
    judged = len(both) - len(unjudged)
    out = [f"<h2 id='changed'>What changed since {esc(cmp.old.path.name)}</h2>",
           f"<p>{esc(changed_sentence(len(flagged), judged, len(unjudged)))} Against <code>{esc(cmp.old.path)}</code> "
           "(<a href='#compared'>the comparison</a>).</p>"]
    tonight = _machine_tonight(history)
    if tonight is not None:
        out.insert(1, f"<p class='note'>This night every job's kernels moved {tonight.size_pct:+.1f}% together "
                      f"({tonight.agree} of {tonight.jobs} jobs): the machine's, not the kernels' (the change points "
                      "above); the flags below are that shift's, unless a change point names them.</p>")
    if len(unjudged):
        out.append(f"<p class='note'>Not judged, their noise hiding any change: "
                   f"{esc(', '.join(unjudged['label'][:CHANGED_LISTED]))}"
                   f"{f' and {len(unjudged) - CHANGED_LISTED} more' if len(unjudged) > CHANGED_LISTED else ''}.</p>")
    if len(flagged):
        out.append("<ul>")
        for _, r in flagged.head(CHANGED_LISTED).iterrows():
            d = cmp.details.get(r["key"])
            moved = ""
            if d is not None and not d.kernels.empty:
                k = d.kernels.iloc[0]
                moved = (f"; most moved kernel: <code>{esc(short(str(k['kernel']), 60))}</code> "
                         f"{fmt_num(k['change_pct'], '{:+.0f}')}% ({esc(k['change'])})")
            out.append(f"<li>{esc(r['label'])}: {esc(r['verdict'])} ({esc(r['why'])}), step "
                       f"{fmt_num(r['step_change_pct'], '{:+.1f}')}%, kernels {fmt_num(r['device_change_pct'], '{:+.1f}')}%"
                       f"{moved}</li>")
        if len(flagged) > CHANGED_LISTED:
            out.append(f"<li>and {len(flagged) - CHANGED_LISTED} more flagged jobs: "
                       "<a href='#compared'>the comparison</a></li>")
        out.append("</ul>")
    return out


CHANGED_LISTED = 10  # flagged jobs listed on the first screen; the rest in the comparison


def _machine_tonight(history):
    """The history's machine night (sweeper/analysis/night_noise.py) if it is the last night."""
    cleaned = getattr(getattr(history, "history", None), "cleaned", None)
    if cleaned is None or not history.nights:
        return None
    return next((m for m in cleaned.machine if m.night == len(history.nights) - 1), None)


def history_section(got) -> list[str]:
    """The nightly's first screen, first: the change points over the history that ends
    with this sweep (changes_text.Changes), one line a cause with the changes that make it up
    folded under it, as `history changes` says them."""
    from sweeper.analysis.changes import WINDOW
    from sweeper.reporting.changes_text import cause_details, cause_line, machine_lines

    last = got.nights[-1] if got.nights else "?"
    causes = got.causes
    recent = [k for k in causes if k.night >= len(got.nights) - WINDOW]
    out = [f"<h2 id='history-changes'>What changed over the last {count(len(got.nights), 'night')}</h2>",
           f"<p>{count(len(causes), 'change')} ({count(len(got.changes), 'series', 'series')} moved) over the "
           f"nightly history up to this sweep ({esc(last)}), {len(recent)} starting in the last {WINDOW} nights; "
           f"{esc(got.false_rate)}. The same as <code>python -m sweeper.history changes "
           f"{esc(got.sweeps[-1].parent if got.sweeps else '')}</code>.</p>"]
    if causes:
        out.append("<ul>")
        for k in causes[:CHANGED_LISTED]:
            details = "".join(f"<li>{esc(d.removeprefix('- '))}</li>" for d in cause_details(k, got))
            out.append(f"<li>{esc(cause_line(k, got))}<details><summary>what makes it up</summary><ul>{details}"
                       "</ul></details></li>")
        if len(causes) > CHANGED_LISTED:
            out.append(f"<li>and {len(causes) - CHANGED_LISTED} more: <code>history changes</code></li>")
        out.append("</ul>")
    machine = machine_lines(got)
    if machine:
        out.append("<p>Taken out before the tests:</p><ul>" + "".join(f"<li>{esc(m)}</li>" for m in machine) + "</ul>")
    return out


def changed_sentence(flagged: int, judged: int, unjudged: int) -> str:
    """What the compare found, in one sentence that says what was judged and what was not."""
    total = judged + unjudged
    if not judged:
        return f"0 of {count(total, 'job')} flagged: none could be judged, their noise hiding any change."
    not_judged = f"; {unjudged} could not be judged, their noise hiding any change" if unjudged else ""
    if flagged:
        return (f"{flagged} of {count(total, 'job')} flagged (a change beyond their noise, or of their status), "
                f"of {judged} judged{not_judged}.")
    return f"0 of {count(total, 'job')} flagged: of the {judged} judged, none moved beyond its noise{not_judged}."


def builds_section(builds, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame,
                    flagged_only: bool = False) -> list[str]:
    """The environments the jobs ran in, then each later build against the first.
    flagged_only: the kernel-level diffs of flagged pairs only (a large sweep's page)."""
    key = builds[0].between[0]
    out = [f"<h2 id='builds'>Builds compared ({esc(key)})</h2>",
           "<p>The same jobs under each Python environment, run in this sweep one after the other on the same "
           "GPUs (A, B, A, B), so that a drift of the machine hits both builds alike.</p>",
           "<table id='build-environments'><tr><th>" + esc(key) + "</th><th>interpreter</th><th>torch</th>"
           "<th>triton</th><th>timm</th><th>jobs</th></tr>"]
    for value, group in jobs.groupby(key, sort=False):
        env = next(((records.get(n) or {}).get("environment") or {} for n in group["job"]
                    if (records.get(n) or {}).get("environment")), {})
        out.append(f"<tr><td>{esc(value)}</td><td><code>{esc(env.get('python_executable'))}</code></td>"
                   f"<td>{esc(env.get('torch'))}</td><td>{esc(env.get('triton'))}</td><td>{esc(env.get('timm'))}</td>"
                   f"<td class='num'>{len(group)}</td></tr>")
    out.append("</table>")
    for cmp in builds:
        _, old, new = cmp.between
        out += compared_section(cmp, heading=f"{key}={new} against {key}={old}",
                                 intro=f"Each job under {key}={new} against the same job under {key}={old}, "
                                       f"each pair's noise its two runs' own. {rule_line(cmp)} (docs/method.md, "
                                       f"\"Comparing sweeps\"). {len(cmp.flagged)} of "
                                       f"{int((cmp.jobs['status_old'].notna() & cmp.jobs['status_new'].notna()).sum())} "
                                       "pairs flagged.", level=3, table_id="build-comparison",
                                 flagged_only=flagged_only)
    return out


def compared_section(cmp, heading: str | None = None, intro: str | None = None, level: int = 2,
                      table_id: str = "comparison", flagged_only: bool = False) -> list[str]:
    """Each job against the same job of the earlier sweep (or of the other build): the
    change of its compiled step, the noise it was held against, the verdict; a
    kernel-level diff for each flagged job (for builds: for each pair)."""
    t = cmp.jobs
    intro = intro or (f"Against <code>{esc(cmp.old.path)}</code> (started {esc(cmp.old.started_at)}). {esc(rule_line(cmp))} "
                      f"(docs/method.md, \"Comparing sweeps\"); {count(cmp.history_sweeps, 'complete sweep')} of history. "
                      f"{len(cmp.flagged)} of {count(int(t['status_old'].notna().sum()), 'job')} flagged.")
    out = [f"<h{level} id='{'compared' if table_id == 'comparison' else 'builds-' + esc(cmp.between[2])}'>"
           f"{esc(heading or 'Compared with ' + cmp.old.path.name)}</h{level}>",
           f"<p>{intro if heading is None else esc(intro)}</p>",
           fold_open(len(t), flagged_only, "every job's row"),
           f"<table id='{table_id}'><tr><th>job</th><th>loop step ms before → now</th><th>change %</th><th>noise ±%</th>"
           "<th>kernel ms before → now</th><th>change %</th><th>noise ±%</th><th>verdict</th><th>why</th>"
           "<th>busy % before → now</th></tr>"]
    for _, r in t.iterrows():
        cls = "failed" if r["verdict"] in ("slower",) or str(r["verdict"]).startswith("status") else ""
        out.append(f"<tr class='{cls}'><td>{esc(r['label'])}</td>"
                   f"<td class='num'>{fmt_num(r['step_ms_old'])} → {fmt_num(r['step_ms_new'])}</td>"
                   f"<td class='num'>{fmt_num(r['step_change_pct'], '{:+.1f}')}</td><td class='num'>{fmt_num(r['noise_pct'], '{:.1f}')}</td>"
                   f"<td class='num'>{fmt_num(r['device_ms_old'], '{:.3f}')} → {fmt_num(r['device_ms_new'], '{:.3f}')}</td>"
                   f"<td class='num'>{fmt_num(r['device_change_pct'], '{:+.1f}')}</td>"
                   f"<td class='num'>{fmt_num(r['device_noise_pct'], '{:.1f}')}</td><td>{esc(r['verdict'])}</td>"
                   f"<td>{esc(r['why'])}</td>"
                   f"<td class='num'>{fmt_num(r['busy_pct_old'], '{:.1f}')} → {fmt_num(r['busy_pct_new'], '{:.1f}')}</td></tr>")
    out.append("</table>" + fold_close(len(t), flagged_only))
    shown = set(cmp.flagged["key"]) if flagged_only else set(cmp.details)
    for key, d in cmp.details.items():
        if key not in shown:
            continue
        out.append(f"<h3>{esc(d.label)}: kernels that moved</h3><p>Category shares %: " + ", ".join(
            f"{esc(c)} {fmt_num(d.shares_old.get(c), '{:.1f}')} → {fmt_num(d.shares_new.get(c), '{:.1f}')}"
            for c in sorted(set(d.shares_old.index) | set(d.shares_new.index))) + "; " + "; ".join(
            f"{esc(n)} {fmt_num(a, '{:.1f}')} → {fmt_num(b, '{:.1f}')}" for n, (a, b) in d.figures.items()) + "</p>")
        if d.kernels.empty:
            out.append("<p>No kernel above 1% of the step moved by the threshold.</p>")
            continue
        out.append("<table class='kernel-diff'><tr><th>kernel</th><th>category</th><th>ms before</th><th>ms now</th>"
                   "<th>change %</th><th>what</th></tr>")
        for _, k in d.kernels.head(10).iterrows():
            out.append(f"<tr><td>{esc(str(k['kernel'])[:100])}</td><td>{esc(k['category'])}</td>"
                       f"<td class='num'>{fmt_num(k['device_ms_old'], '{:.3f}')}</td><td class='num'>{fmt_num(k['device_ms_new'], '{:.3f}')}</td>"
                       f"<td class='num'>{fmt_num(k['change_pct'], '{:+.1f}')}</td><td>{esc(k['change'])}</td></tr>")
        out.append("</table>")
    return out


def rule_line(cmp) -> str:
    """The flagging rule, in the words of the device the sweep ran on."""
    gpu = ("A job is flagged when its kernels' time per step, or its step time with its kernel launches, "
           f"changed by at least {cmp.threshold_pct:g}% and by more than the noise of both runs; a step time "
           "that moved alone is the host's")
    cpu = (f"A job is flagged when its step time changed by at least {cmp.threshold_pct:g}% and by more than "
           "the noise of both runs")
    word = device_word(cmp.new.jobs)
    return {"GPU": gpu, "CPU": cpu}.get(word, f"{gpu}; on a CPU, the step time alone")
