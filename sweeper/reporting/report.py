"""report.html: one page per sweep that opens from the file system with no server (pure:
tables and figures in, HTML out). Its figures are embedded as data URIs, so the page is
self-contained, unless they weigh more than EMBED_MAX_BYTES (a sweep of hundreds of jobs):
then the page links them in figures/ beside it."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from sweeper.analysis.attribution import modules_said
from sweeper.command_line import rerun_command
from sweeper.reporting import tables
from sweeper.reporting.figures import Figure, device_word
from sweeper.reporting.findings import Finding
from sweeper.reporting.load import LoadedSweep
from sweeper.reporting.overview import SMALL_SWEEP_JOBS, Overview, rule_summaries

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1300px; color: #222; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.failed { background: #fde8e8; } .skipped { background: #fff6db; } .cancelled { background: #eee; }
.note { color: #805b00; } code { background: #f5f5f5; padding: 1px 4px; }
figure { margin: 1em 0 2em; } img { max-width: 100%; border: 1px solid #ddd; }
td.small { font-size: 11px; max-width: 320px; } code { word-break: break-all; }
p.small { font-size: 12px; color: #555; } ul.findings li { margin: 0.35em 0; line-height: 1.4; overflow-wrap: anywhere; }
img { height: auto; }
table.compact td:nth-child(n+3) { text-align: right; font-variant-numeric: tabular-nums; }
span.small { font-size: 12px; color: #555; font-weight: normal; } details.job { border-top: 1px solid #eee; padding: 2px 0; } details.job[open] { padding-bottom: 0.8em; }
@media (max-width: 700px) { body { margin: 0.6em; } table { font-size: 11px; display: block; overflow-x: auto; } }
"""


def _e(x) -> str:
    return html.escape("" if x is None else str(x))


def _num(x, fmt="{:.2f}") -> str:
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "–"
    return fmt.format(x)


def _text(x) -> str | None:
    """A table cell as text, None where it is empty (None or pandas' NaN)."""
    return None if x is None or (isinstance(x, float) and pd.isna(x)) or x == "" else str(x)


def _log_of(row, entries: dict) -> str | None:
    """The job's log path: its record's, else its summary entry's; None when there is none
    (a job cancelled before it started)."""
    entry = entries.get(row["job"], {})
    return _text(row["log"]) or _text(entry.get("log"))


def _link(path: str | None, sweep_dir: Path, text: str) -> str:
    if path is None or not _text(path):
        return "–"
    try:
        href = os.path.relpath(path, sweep_dir)  # relative: the folder can be copied elsewhere
    except ValueError:
        href = path
    return f'<a href="{_e(href)}">{_e(text)}</a>'


@dataclass
class ReportView:
    """What the analysis made of a sweep, for the page: figures, notes, findings, the
    module-view table, the comparisons (with the earlier sweep, between builds) and the
    sweep's overview (sweeper/reporting/overview.py)."""
    figures: list[Figure]
    notes: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    module_view: pd.DataFrame | None = None
    comparison: Any = None  # sweeps.Comparison with the earlier sweep, or None
    builds: list = field(default_factory=list)  # sweeps.Comparison between builds of this sweep
    overview: Overview | None = None
    embed_figures: bool = True  # figures inside the page (data URIs), else linked beside it


def render(sweep: LoadedSweep, view: ReportView) -> str:
    """The page. Its first screen answers. Up to SMALL_SWEEP_JOBS jobs: what changed since
    the earlier sweep of the same grid (when there is one), then the findings
    (sweeper/reporting/findings.py), each linked to its row or figure; then what to read
    with care (notes), the jobs, each job's module view against its step, the environment,
    the builds compared within the sweep (python=a,b), the comparison in full, failed jobs,
    figures, costliest kernels, re-runs. A larger sweep: what changed, then the sweep at a
    glance (overview.py: its time by category, family and variant, its costliest jobs and
    kernels, what each per-job rule found), then the jobs table (sortable, filterable), the
    figures, and a section a job with its findings and costliest kernels."""
    if len(sweep.jobs) <= SMALL_SWEEP_JOBS:
        return _small_page(sweep, view)
    return _large_page(sweep, view)


def _small_page(sweep: LoadedSweep, view: ReportView) -> str:
    sweep_dir, summary, records, jobs = sweep.path, sweep.summary, sweep.records, sweep.jobs
    entries = {j["num"]: j for j in summary.get("jobs", [])}
    out = _header(sweep_dir, summary, records, jobs)
    out += _changed_section(view.comparison) if view.comparison is not None else []
    out += _findings_section(view.findings, jobs)
    out += _to_win_section(sweep.recoverable)
    out += _notes_section(view.notes)
    out += _jobs_section(sweep_dir, records, jobs, entries)
    mv = view.module_view
    out += _module_view_section(mv) if mv is not None and len(mv) else []
    out += _environment(records, jobs)
    out += _builds_section(view.builds, records, jobs) if view.builds else []
    out += _compared_section(view.comparison) if view.comparison is not None else []
    out += _failed_section(records, jobs, entries)
    out += _figures_section(view.figures, sweep_dir, view.embed_figures)
    out += _kernels_section(sweep.bench, sweep.kernels)
    out += _rerun_section(entries)
    out += [_RENDERED_SCRIPT, "</body></html>"]
    return "\n".join(out)


def _large_page(sweep: LoadedSweep, view: ReportView) -> str:
    sweep_dir, summary, records, jobs = sweep.path, sweep.summary, sweep.records, sweep.jobs
    entries = {j["num"]: j for j in summary.get("jobs", [])}
    per_job = [f for f in view.findings if f.scope != "across jobs"]
    across = [f for f in view.findings if f.scope == "across jobs"]
    out = _header(sweep_dir, summary, records, jobs)
    out += _changed_section(view.comparison) if view.comparison is not None else []
    out += _overview_section(view.overview, across, per_job, jobs) if view.overview is not None else []
    out += _to_win_section(sweep.recoverable)
    out += _notes_section(view.notes)
    out += _jobs_section(sweep_dir, records, jobs, entries, details=True)
    out += _figures_section(view.figures, sweep_dir, view.embed_figures)
    out += _failed_section(records, jobs, entries)
    out += _environment(records, jobs)
    out += _builds_section(view.builds, records, jobs, flagged_only=True) if view.builds else []
    out += _compared_section(view.comparison, flagged_only=True) if view.comparison is not None else []
    mv = view.module_view
    out += _module_view_section(mv, large=True) if mv is not None and len(mv) else []
    out += _job_details_section(sweep.bench, jobs, sweep.kernels, per_job)
    out += _rerun_section(entries, folded=True)
    out += [_TABLE_SCRIPT, _OPEN_SCRIPT, _RENDERED_SCRIPT, "</body></html>"]
    return "\n".join(out)


def _notes_section(notes: list[str]) -> list[str]:
    if not notes:
        return []
    return ["<h2 id='notes'>Read with care</h2><ul>"] + [f"<li class='note'>{_e(n)}</li>" for n in notes] + ["</ul>"]


def _header(sweep_dir: Path, summary: dict, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame) -> list[str]:
    out = [f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' content='width=device-width, initial-scale=1'><title>sweeper report: {_e(sweep_dir.name)}</title>",
           f"<style>{_STYLE}</style></head><body>",
           f"<h1>sweeper report: {_e(sweep_dir.name)}</h1>", f"<p>Folder: <code>{_e(sweep_dir)}</code></p>"]
    command = summary.get("command")
    out.append(f"<p>Command: <code>{_e(rerun_command(command or []))}</code>"
               f"<br>Started {_e(summary.get('started_at'))}"
               + (f", {_e(summary.get('elapsed_s'))} s" if summary.get("elapsed_s") is not None else "") + "; "
               f"{len(jobs)} jobs: " + ", ".join(f"{n} {s}" for s, n in jobs["status"].value_counts().items()) + "</p>")
    return out


def _environment(records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame) -> list[str]:
    ok = jobs[jobs["status"] == "ok"]
    env = next((records[n].get("environment") or {} for n in ok["job"] if n in records), {})
    if not env:
        return []
    keys: tuple[str, ...] = ("gpu", "gpu_count", "driver", "cuda", "torch", "triton", "timm", "python", "host",
                             "cpu_count")
    if not env.get("gpu"):  # a CPU sweep: the torch build's CUDA says nothing of what ran
        keys = tuple(k for k in keys if k not in ("gpu", "gpu_count", "driver", "cuda"))
    return ["<h2 id='environment'>Environment</h2><table>" + "".join(
        f"<tr><th>{k}</th><td>{_e(env.get(k))}</td></tr>" for k in keys if env.get(k) is not None) + "</table>"]


def _changed_section(cmp) -> list[str]:
    """The nightly's first screen: what changed against the earlier sweep of the same grid."""
    t = cmp.jobs
    both = t[t["status_old"].notna() & t["status_new"].notna()]
    flagged = cmp.flagged
    unjudged = both[both["verdict"] == "cannot judge"]
    judged = len(both) - len(unjudged)
    out = [f"<h2 id='changed'>What changed since {_e(cmp.old.path.name)}</h2>",
           f"<p>{_e(changed_sentence(len(flagged), judged, len(unjudged)))} Against <code>{_e(cmp.old.path)}</code> "
           "(<a href='#compared'>the comparison</a>).</p>"]
    if len(unjudged):
        out.append(f"<p class='note'>Not judged, their noise hiding any change: "
                   f"{_e(', '.join(unjudged['label'][:CHANGED_LISTED]))}"
                   f"{f' and {len(unjudged) - CHANGED_LISTED} more' if len(unjudged) > CHANGED_LISTED else ''}.</p>")
    if len(flagged):
        out.append("<ul>")
        for _, r in flagged.head(CHANGED_LISTED).iterrows():
            d = cmp.details.get(r["key"])
            moved = ""
            if d is not None and not d.kernels.empty:
                k = d.kernels.iloc[0]
                moved = (f"; most moved kernel: <code>{_e(_short(str(k['kernel']), 60))}</code> "
                         f"{_num(k['change_pct'], '{:+.0f}')}% ({_e(k['change'])})")
            out.append(f"<li>{_e(r['label'])}: {_e(r['verdict'])} ({_e(r['why'])}), step "
                       f"{_num(r['step_change_pct'], '{:+.1f}')}%, kernels {_num(r['device_change_pct'], '{:+.1f}')}%"
                       f"{moved}</li>")
        if len(flagged) > CHANGED_LISTED:
            out.append(f"<li>and {len(flagged) - CHANGED_LISTED} more flagged jobs: "
                       "<a href='#compared'>the comparison</a></li>")
        out.append("</ul>")
    return out


CHANGED_LISTED = 10  # flagged jobs listed on the first screen; the rest in the comparison


def changed_sentence(flagged: int, judged: int, unjudged: int) -> str:
    """What the compare found, in one sentence that says what was judged and what was not."""
    total = judged + unjudged
    if not judged:
        return f"0 of {total} jobs flagged: none could be judged, their noise hiding any change."
    not_judged = f"; {unjudged} could not be judged, their noise hiding any change" if unjudged else ""
    if flagged:
        return (f"{flagged} of {total} jobs flagged (a change beyond their noise, or of their status), "
                f"of {judged} judged{not_judged}.")
    return f"0 of {total} jobs flagged: of the {judged} judged, none moved beyond its noise{not_judged}."


def _overview_section(o: Overview, across: list[Finding], per_job: list[Finding], jobs: pd.DataFrame) -> list[str]:
    """The large sweep's first screen: the sweep-level sentences (overview.py, then the
    across-jobs findings, then what each per-job rule found and where it matters most),
    then its costliest jobs and kernels and its time by family and variant."""
    job_of = dict(zip(jobs["label"], jobs["job"]))
    said = o.findings + across + rule_summaries(per_job, job_of)
    dev = o.device
    out = ["<h2 id='findings'>The sweep at a glance</h2><ul class='findings sweep'>"]
    for f in said:
        out.append(f"<li data-rule='{_e(f.rule)}'>{_e(f.text)} <a href='{_e(f.link)}'>(see)</a></li>")
    out.append(f"</ul><p class='small'>Ranked by {dev} time a step, one step of each finished job (the sweep's "
               f"{dev} time: their sum). Left to win: a launch's time above its bound at the device's measured roofs "
               "(copy bandwidth, matmul peak per dtype; before the roofline, a benchmarked Triton kernel's time above "
               "the measured peak bandwidth). Each job's own findings are in its section "
               "(<a href='#details'>Each job</a>), linked from the jobs table; the rules: docs/method.md, "
               "\"Findings\".</p>")
    if len(o.top_jobs):
        out.append(f"<h3 id='overview-jobs'>Costliest jobs</h3><table id='top-jobs'><tr><th>job</th>"
                   f"<th>{dev} ms a step</th><th>% of the sweep</th><th>busy %</th><th>speedup</th>"
                   "<th>left to win ms</th></tr>")
        for _, r in o.top_jobs.iterrows():
            out.append(f"<tr><td><a href='#details-{r['job']}'>{_e(r['label'])}</a></td>"
                       f"<td class='num'>{_num(r['device_ms'])}</td><td class='num'>{_num(r['share_pct'], '{:.1f}')}</td>"
                       f"<td class='num'>{_num(r['busy_pct'], '{:.0f}')}</td><td class='num'>{_num(r['speedup'])}</td>"
                       f"<td class='num'>{_num(r['left_ms'], '{:.3f}')}</td></tr>")
        out.append("</table>")
    if len(o.top_kernels):
        out.append(f"<h3 id='overview-kernels'>Costliest kernels</h3><table id='top-kernels'><tr><th>kernel</th>"
                   f"<th>category</th><th>job</th><th>{dev} ms a step</th><th>% of the sweep</th>"
                   "<th>% of peak bandwidth</th><th>left to win ms</th></tr>")
        for _, k in o.top_kernels.iterrows():
            out.append(f"<tr><td><code title='{_e(_short(str(k['kernel']), 300))}'>{_e(_short(str(k['kernel'])))}</code></td>"
                       f"<td>{_e(k['category'])}</td><td><a href='#details-{k['job']}'>{_e(k['label'])}</a></td>"
                       f"<td class='num'>{_num(k['device_ms'], '{:.3f}')}</td>"
                       f"<td class='num'>{_num(k['share_pct'], '{:.2f}')}</td>"
                       f"<td class='num'>{_num(k.get('pct_of_peak'), '{:.0f}')}</td>"
                       f"<td class='num'>{_num(k.get('left_ms'), '{:.3f}')}</td></tr>")
        out.append("</table>")
    for name, table, col in (("families", o.by_family, "family"), ("variants", o.by_variant, "variant")):
        out.append(f"<h3 id='overview-{name}'>By model {col}</h3>" if col == "family"
                   else f"<h3 id='overview-{name}'>By variant</h3>")
        out.append(f"<table id='by-{col}'><tr><th>{col}</th><th>jobs</th><th>{dev} ms a step</th><th>% of the sweep</th>"
                   "<th>busy % (median)</th><th>speedup (median)</th></tr>")
        for _, r in table.iterrows():
            out.append(f"<tr><td>{_e(r[col])}</td><td class='num'>{r['jobs']}</td><td class='num'>{_num(r['device_ms'])}</td>"
                       f"<td class='num'>{_num(r['share_pct'], '{:.1f}')}</td><td class='num'>{_num(r['busy_median'], '{:.0f}')}</td>"
                       f"<td class='num'>{_num(r['speedup_median'])}</td></tr>")
        out.append("</table>")
    return out


def _job_details_section(bench: pd.DataFrame, jobs: pd.DataFrame, kernels: pd.DataFrame,
                         found: list[Finding]) -> list[str]:
    """A section a job, folded (one line each, opened by a click or by a link to it): its
    findings, then its costliest kernels (KERNELS_PER_JOB_LARGE)."""
    by_label: dict[str, list[Finding]] = {}
    for f in found:
        by_label.setdefault(f.scope, []).append(f)
    step = kernels[kernels["scope"] == "step"]
    step_of = {j: g for j, g in step.groupby("job", sort=False)}
    benched = _benched(bench)
    out = ["<h2 id='details'>Each job</h2><p>Each job's findings and its costliest kernels of the compiled step, "
           "a line a job: click to open (a link from the jobs table or the overview opens it). Every kernel: "
           "<code>tables/kernels.csv</code>.</p>"]
    for _, r in jobs.iterrows():
        mine = by_label.get(r["label"], [])
        rules = ", ".join(dict.fromkeys(f.rule.replace("_", " ") for f in mine if f.rule != "where_time_goes"))
        out.append(f"<details class='job' id='details-{r['job']}'><summary>#{r['job']} {_e(r['label'])} "
                   f"<span class='small'>({_e(r['status'])}{'; ' + _e(rules) if rules else ''}; "
                   f"<a href='#job-{r['job']}'>its row</a>)</span></summary>")
        if mine:
            out.append("<ul class='findings job'>" + "".join(
                f"<li data-rule='{_e(f.rule)}'>{_e(f.text)}</li>" for f in mine) + "</ul>")
        rows = step_of.get(r["job"])
        if rows is not None and len(rows):
            out += _kernel_table(r["job"], rows, benched.get(r["job"]) or {}, KERNELS_PER_JOB_LARGE, heading=False)
        out.append("</details>")
    return out


def _to_win_section(recoverable: pd.DataFrame) -> list[str]:
    """The launch sites with the most left to win over the sweep (sweeper/reporting/roofline.py);
    nothing where no record has a roofline."""
    from sweeper.reporting.roofline import TOP_TO_WIN, ranking

    top = ranking(recoverable, TOP_TO_WIN) if len(recoverable) else recoverable
    if top.empty:
        return []
    out = ["<h3 id='to-win'>Most left to win</h3><table id='to-win-table'><tr><th>kernel</th><th>model code</th>"
           "<th>job</th><th>ms a step</th><th>bound ms</th><th>bound by</th><th>% of bound</th><th>left to win ms</th></tr>"]
    for _, r in top.iterrows():
        where = " ".join(str(x) for x in (r["module"], f"({r['source']})" if r["source"] else None) if x)
        out.append(f"<tr><td><code title='{_e(_short(str(r['kernel']), 300))}'>{_e(_short(str(r['kernel']), 50))}</code>"
                   f"<br><span class='small'>{_e(r['category'])}</span></td><td class='small'>{_e(where)}</td>"
                   f"<td><a href='#job-{r['job']}'>{_e(r['label'])}</a></td><td class='num'>{_num(r['device_ms'], '{:.3f}')}</td>"
                   f"<td class='num'>{_num(r['bound_ms'], '{:.3f}')}</td>"
                   f"<td>{_e(r['bound_by'])}{' ' + _e(r['dtype']) if r['bound_by'] == 'compute' else ''}</td>"
                   f"<td class='num'>{_num(r['efficiency_pct'], '{:.0f}')}</td>"
                   f"<td class='num'>{_num(r['recoverable_ms'], '{:.3f}')}</td></tr>")
    out.append("</table><p class='small'>A launch site's bound: its time at the device's measured roofs, the larger "
               "of bytes / copy bandwidth and FLOPs / the matmul peak of its dtype; left to win: its time above that. "
               "Every site of every job: <code>tables/recoverable.csv</code>; method: docs/method.md, \"How far each "
               "kernel is from the hardware\".</p>")
    return out


def _findings_section(findings, jobs: pd.DataFrame) -> list[str]:
    """The findings, each a sentence with its figures and a link to what shows it."""
    out = ["<h2 id='findings'>Findings</h2>"]
    if not findings:
        return out + ["<p>No rule of docs/method.md (\"Findings\") found anything in this sweep's data.</p>"]
    out.append("<ul class='findings'>")
    for f in findings:
        what = "the row" if f.link.startswith("#job-") else ("the kernels" if f.link.startswith("#kernels-") else
                                                             "the table" if f.link == "#module-view" else "the figure")
        out.append(f"<li data-rule='{_e(f.rule)}'>{_e(f.text)} <a href='{_e(f.link)}'>({what})</a></li>")
    out.append("</ul><p class='small'>Each finding comes from a rule with fixed thresholds "
               "(docs/method.md, \"Findings\"); one whose data is missing is left out.</p>")
    return out


FOLD_ROWS = 30  # a large page's full tables longer than this open on a click


def _fold_open(rows: int, large: bool, what: str) -> str:
    """A large page's long table starts folded: `<details>` whose summary says what it holds."""
    return f"<details><summary>{_e(what)} ({rows})</summary>" if large and rows > FOLD_ROWS else ""


def _fold_close(rows: int, large: bool) -> str:
    return "</details>" if large and rows > FOLD_ROWS else ""


def _module_view_section(table: pd.DataFrame, large: bool = False) -> list[str]:
    out = ["<h2 id='module-view'>Module view against the step</h2>",
           "<p>Each job's compiled modules profiled alone (the view <code>python &lt;module&gt;.py -p</code> "
           "gives) against its real step: the category where their shares differ most. Over 1.5 points, a "
           "finding says so; read the step's shares for that job.</p>",
           _fold_open(len(table), large, "every job's row"),
           "<table id='module-view-table'><tr><th>job</th><th>category</th><th>modules %</th><th>step %</th>"
           "<th>difference (points)</th></tr>"]
    for _, r in table.iterrows():
        out.append(f"<tr><td>{_e(r['label'])}</td><td>{_e(r['category'])}</td>"
                   f"<td class='num'>{_num(r['module_view_pct'], '{:.1f}')}</td><td class='num'>{_num(r['step_pct'], '{:.1f}')}</td>"
                   f"<td class='num'>{_num(r['difference_pp'], '{:+.2f}')}</td></tr>")
    return out + ["</table>" + _fold_close(len(table), large)]


# The jobs table's figure columns: (header, column, format). A column no job has a value
# in (NVML and peak memory on a CPU; busy where nothing was profiled) is left out.
# "compiled ms" is the median of the timed steps (the findings' step), "loop ms" the mean
# over the steady loop (what a comparison between sweeps judges).
_JOB_FIGURES = [("compile s", "compile_s", "{:.1f}"), ("eager ms", "eager_step_ms", "{:.2f}"),
                ("compiled ms", "compiled_step_ms", "{:.2f}"), ("loop ms", "steady_step_ms", "{:.2f}"),
                ("speedup", "speedup", "{:.2f}"),
                ("peak MiB", "peak_memory_mb", "{:.0f}"), ("{dev} busy %", "busy_pct", "{:.1f}"),
                ("NVML util %", "nvml_util_pct", "{:.1f}"), ("busy % (as -p)", "busy_pct_reference_style", "{:.1f}"),
                ("other cores busy", "host_busy_cores", "{:.1f}"), ("rounds IQR %", "timing_iqr_pct", "{:.0f}"),
                ("launch µs", "launch_us", "{:.2f}")]


def _jobs_section(sweep_dir: Path, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame, entries: dict,
                  details: bool = False) -> list[str]:
    """The jobs table. details: each label links to the job's section, and the table
    sorts by a click on a column's head and filters by what is typed above it."""
    dev = device_word(jobs)
    shown = [(h.format(dev=dev), c, f) for h, c, f in _JOB_FIGURES if c in jobs and jobs[c].notna().any()]
    out = ["<h2 id='summary'>Jobs</h2>"]
    if details:
        out.append(f"<p class='small'>{len(jobs)} jobs. Click a column's head to sort; type to keep the rows that "
                   "hold the text: <input id='jobs-filter' type='search' placeholder='densenet autotune' "
                   "oninput='sweeperFilter(this.value)'> <span id='jobs-shown'></span></p>")
    out.append("<table id='jobs' class='sortable'><thead><tr><th>#</th><th>job</th><th>status</th>"
               + "".join(f"<th>{_e(h)}</th>" for h, _, _ in shown) + "<th>traces</th><th>log</th></tr></thead><tbody>")
    for _, r in jobs.iterrows():
        rec = records.get(r["job"], {})
        traces = (rec.get("artifacts") or {}).get("traces") or {}
        links = " ".join(_link(p, sweep_dir, name) for name, p in traces.items()) or "–"
        name = f"<a href='#details-{r['job']}'>{_e(r['label'])}</a>" if details else _e(r["label"])
        out.append(
            f"<tr id='job-{r['job']}' class='{_e(r['status'])}'><td>{r['job']}</td><td>{name}</td><td>{_e(r['status'])}</td>"
            + "".join(f"<td class='num'>{_num(r[c], f)}{_compile_state_mark(r) if c == 'compile_s' else ''}</td>"
                      for _, c, f in shown)
            + f"<td>{links}</td><td>{_link(_log_of(r, entries), sweep_dir, 'job.log')}</td></tr>")
    out.append("</tbody></table>")
    return out


def _compile_state_mark(row: pd.Series) -> str:
    """After a compile time that is not a cold compile's: why (tables.compile_state), and
    the compile seconds of the job's earlier, stopped runs that this one went on from."""
    state = tables.state_of(row)
    built = row.get("cpp_builds")
    if state == "warm" and built is not None and pd.notna(built) and built > 0:  # a CPU's, libraries of another host
        state = f"warm; {int(built)} C++ files built again"
    out = "" if state == "cold" else f" <span class='note' title='{_e(tables.JOB_COLUMNS['compile_state'])}'>({state})</span>"
    before = row.get("compile_s_before")
    if before is not None and pd.notna(before):
        out += (f" <span class='note' title='{_e(tables.JOB_COLUMNS['compile_s_before'])}'>"
                f"(+{before:.1f} s in earlier stopped runs)</span>")
    return out


def _builds_section(builds, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame,
                    flagged_only: bool = False) -> list[str]:
    """The environments the jobs ran in, then each later build against the first.
    flagged_only: the kernel-level diffs of flagged pairs only (a large sweep's page)."""
    key = builds[0].between[0]
    out = [f"<h2 id='builds'>Builds compared ({_e(key)})</h2>",
           "<p>The same jobs under each Python environment, run in this sweep one after the other on the same "
           "GPUs (A, B, A, B), so that a drift of the machine hits both builds alike.</p>",
           "<table id='build-environments'><tr><th>" + _e(key) + "</th><th>interpreter</th><th>torch</th>"
           "<th>triton</th><th>timm</th><th>jobs</th></tr>"]
    for value, group in jobs.groupby(key, sort=False):
        env = next(((records.get(n) or {}).get("environment") or {} for n in group["job"]
                    if (records.get(n) or {}).get("environment")), {})
        out.append(f"<tr><td>{_e(value)}</td><td><code>{_e(env.get('python_executable'))}</code></td>"
                   f"<td>{_e(env.get('torch'))}</td><td>{_e(env.get('triton'))}</td><td>{_e(env.get('timm'))}</td>"
                   f"<td class='num'>{len(group)}</td></tr>")
    out.append("</table>")
    for cmp in builds:
        _, old, new = cmp.between
        out += _compared_section(cmp, heading=f"{key}={new} against {key}={old}",
                                 intro=f"Each job under {key}={new} against the same job under {key}={old}, "
                                       f"each pair's noise its two runs' own. {_rule(cmp)} (docs/method.md, "
                                       f"\"Comparing sweeps\"). {len(cmp.flagged)} of "
                                       f"{int((cmp.jobs['status_old'].notna() & cmp.jobs['status_new'].notna()).sum())} "
                                       "pairs flagged.", level=3, table_id="build-comparison",
                                 flagged_only=flagged_only)
    return out


def _compared_section(cmp, heading: str | None = None, intro: str | None = None, level: int = 2,
                      table_id: str = "comparison", flagged_only: bool = False) -> list[str]:
    """Each job against the same job of the earlier sweep (or of the other build): the
    change of its compiled step, the noise it was held against, the verdict; a
    kernel-level diff for each flagged job (for builds: for each pair)."""
    t = cmp.jobs
    intro = intro or (f"Against <code>{_e(cmp.old.path)}</code> (started {_e(cmp.old.started_at)}). {_e(_rule(cmp))} "
                      f"(docs/method.md, \"Comparing sweeps\"); {cmp.history_sweeps} complete sweeps of history. "
                      f"{len(cmp.flagged)} of {int(t['status_old'].notna().sum())} jobs flagged.")
    out = [f"<h{level} id='{'compared' if table_id == 'comparison' else 'builds-' + _e(cmp.between[2])}'>"
           f"{_e(heading or 'Compared with ' + cmp.old.path.name)}</h{level}>",
           f"<p>{intro if heading is None else _e(intro)}</p>",
           _fold_open(len(t), flagged_only, "every job's row"),
           f"<table id='{table_id}'><tr><th>job</th><th>loop step ms before → now</th><th>change %</th><th>noise ±%</th>"
           "<th>kernel ms before → now</th><th>change %</th><th>noise ±%</th><th>verdict</th><th>why</th>"
           "<th>busy % before → now</th></tr>"]
    for _, r in t.iterrows():
        cls = "failed" if r["verdict"] in ("slower",) or str(r["verdict"]).startswith("status") else ""
        out.append(f"<tr class='{cls}'><td>{_e(r['label'])}</td>"
                   f"<td class='num'>{_num(r['step_ms_old'])} → {_num(r['step_ms_new'])}</td>"
                   f"<td class='num'>{_num(r['step_change_pct'], '{:+.1f}')}</td><td class='num'>{_num(r['noise_pct'], '{:.1f}')}</td>"
                   f"<td class='num'>{_num(r['device_ms_old'], '{:.3f}')} → {_num(r['device_ms_new'], '{:.3f}')}</td>"
                   f"<td class='num'>{_num(r['device_change_pct'], '{:+.1f}')}</td>"
                   f"<td class='num'>{_num(r['device_noise_pct'], '{:.1f}')}</td><td>{_e(r['verdict'])}</td>"
                   f"<td>{_e(r['why'])}</td>"
                   f"<td class='num'>{_num(r['busy_pct_old'], '{:.1f}')} → {_num(r['busy_pct_new'], '{:.1f}')}</td></tr>")
    out.append("</table>" + _fold_close(len(t), flagged_only))
    shown = set(cmp.flagged["key"]) if flagged_only else set(cmp.details)
    for key, d in cmp.details.items():
        if key not in shown:
            continue
        out.append(f"<h3>{_e(d.label)}: kernels that moved</h3><p>Category shares %: " + ", ".join(
            f"{_e(c)} {_num(d.shares_old.get(c), '{:.1f}')} → {_num(d.shares_new.get(c), '{:.1f}')}"
            for c in sorted(set(d.shares_old.index) | set(d.shares_new.index))) + "; " + "; ".join(
            f"{_e(n)} {_num(a, '{:.1f}')} → {_num(b, '{:.1f}')}" for n, (a, b) in d.figures.items()) + "</p>")
        if d.kernels.empty:
            out.append("<p>No kernel above 1% of the step moved by the threshold.</p>")
            continue
        out.append("<table class='kernel-diff'><tr><th>kernel</th><th>category</th><th>ms before</th><th>ms now</th>"
                   "<th>change %</th><th>what</th></tr>")
        for _, k in d.kernels.head(10).iterrows():
            out.append(f"<tr><td>{_e(str(k['kernel'])[:100])}</td><td>{_e(k['category'])}</td>"
                       f"<td class='num'>{_num(k['device_ms_old'], '{:.3f}')}</td><td class='num'>{_num(k['device_ms_new'], '{:.3f}')}</td>"
                       f"<td class='num'>{_num(k['change_pct'], '{:+.1f}')}</td><td>{_e(k['change'])}</td></tr>")
        out.append("</table>")
    return out


def _rule(cmp) -> str:
    """The flagging rule, in the words of the device the sweep ran on."""
    gpu = ("A job is flagged when its kernels' time per step, or its step time with its kernel launches, "
           f"changed by at least {cmp.threshold_pct:g}% and by more than the noise of both runs; a step time "
           "that moved alone is the host's")
    cpu = (f"A job is flagged when its step time changed by at least {cmp.threshold_pct:g}% and by more than "
           "the noise of both runs")
    word = device_word(cmp.new.jobs)
    return {"GPU": gpu, "CPU": cpu}.get(word, f"{gpu}; on a CPU, the step time alone")


def _failed_section(records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame, entries: dict) -> list[str]:
    out: list[str] = []
    bad = jobs[jobs["status"] != "ok"]
    if len(bad):
        out.append("<h2 id='failed'>Failed, skipped and cancelled jobs</h2><table id='failed-jobs'>"
                   "<tr><th>#</th><th>job</th><th>status</th><th>phase</th><th>reason</th><th>log</th>"
                   "<th>re-run alone</th></tr>")
        for _, r in bad.iterrows():
            overrides = entries.get(r["job"], {}).get("overrides") or (records.get(r["job"], {}).get("job") or {}).get("overrides") or []
            out.append(f"<tr class='{_e(r['status'])}'><td>{r['job']}</td><td>{_e(r['label'])}</td><td>{_e(r['status'])}</td>"
                       f"<td>{_e(r['phase'])}</td><td>{_e(r['reason'])}</td>"
                       f"<td>{_e(_log_of(r, entries) or entries.get(r['job'], {}).get('log_note') or 'no log')}</td>"
                       f"<td><code>{_e(rerun_command(overrides))}</code></td></tr>")
        out.append("</table>")
    return out


def _figures_section(figures: list[Figure], sweep_dir: Path | None = None, embed: bool = True) -> list[str]:
    """Each figure, inside the page (embed) or linked to its file beside it."""
    out: list[str] = []
    out.append("<h2 id='figures'>Figures</h2>")
    for f in figures:
        if f.path is not None and Path(f.path).exists():
            if embed:
                src = "data:image/png;base64," + base64.b64encode(Path(f.path).read_bytes()).decode()
            else:
                src = os.path.relpath(f.path, sweep_dir) if sweep_dir is not None else str(f.path)
            out.append(f"<figure id='fig-{f.name}'><img alt='{_e(f.title)}' src='{_e(src)}'>"
                       f"<figcaption>{_e(f.title)}</figcaption></figure>")
        else:
            out.append(f"<p class='note' id='fig-{f.name}'>{_e(f.title)}: not drawn: {_e(f.note)}</p>")
    return out


KERNELS_PER_JOB = 10
KERNELS_PER_JOB_LARGE = 5  # a large sweep's job sections: every kernel is in tables/kernels.csv


def _benched(bench: pd.DataFrame) -> dict[int, dict[str, dict]]:
    """Job -> kernel name -> its microbenchmark row (tables.microbench_table), empty cells None."""
    out: dict[int, dict[str, dict]] = {}
    if bench.empty:
        return out
    for r in bench.astype(object).where(bench.notna(), None).to_dict("records"):
        if r.get("standalone_ms") is not None or r.get("headroom_method"):
            out.setdefault(r["job"], {})[r["kernel"]] = r
    return out


def _kernels_section(bench: pd.DataFrame, kernels: pd.DataFrame) -> list[str]:
    """Each job's costliest kernels of its compiled step, a table a job; the
    microbenchmark columns only where a job has microbenchmarks (a GPU job)."""
    out = ["<h2 id='kernels'>Costliest kernels of each job (compiled step)</h2>"]
    step = kernels[kernels["scope"] == "step"]
    if step.empty:
        return out + ["<p class='note'>No kernel table: no finished job has a profiled step.</p>"]
    benched = _benched(bench)
    if any(benched.values()):
        out.append("<p>Alone: one launch of the job's own kernel on its file's inputs (L2 flushed), with the "
                   "bandwidth it reached against the job's measured peak (device-to-device copy); headroom: the "
                   "chosen config against the best candidate config. Every benchmarked kernel: "
                   "<code>tables/microbench.csv</code>; every kernel: <code>tables/kernels.csv</code>.</p>")
    else:
        out.append("<p>Every kernel: <code>tables/kernels.csv</code>.</p>")
    for job, rows in step.groupby("job", sort=True):
        out += _kernel_table(job, rows, benched.get(job) or {}, KERNELS_PER_JOB)
    return out


def _kernel_table(job, rows: pd.DataFrame, bench: Mapping[str, Mapping[str, Any]], top_n: int,
                  heading: bool = True) -> list[str]:
    """One job's costliest `top_n` kernels; the microbenchmark columns where it has any.
    Without heading (a large sweep's job section) the table is compact: a name's tooltip
    only where the name is cut, the headroom without its method (tables/microbench.csv has
    it), numbers right-aligned by the table's class rather than each cell's."""
    top = rows.sort_values("device_ms", ascending=False).head(top_n)
    compact = not heading
    num = "<td>" if compact else "<td class='num'>"
    code = "model_modules" in top and bool(top["model_modules"].notna().any())  # records with their model code
    out = [f"<h3 id='kernels-{job}'>{_e(top['label'].iloc[0])}</h3>" if heading else "",
           f"<table class='kernel-table{' compact' if compact else ''}'{f' id=kernels-{job}' if compact else ''}>"
           "<tr><th>kernel</th><th>category</th><th>ms per step</th><th>launches</th><th>share %</th>"
           + ("<th>model code</th>" if code else "")
           + ("<th>alone ms</th><th>% of peak bandwidth</th><th>autotune headroom</th>" if bench else "")
           + "</tr>"]
    for _, k in top.iterrows():
        name = str(k["kernel"])
        title = f" title='{_e(_short(name, 300))}'" if not compact or len(name) > 70 else ""
        cells = (f"<tr><td><code{title}>{_e(_short(name))}</code></td>"
                 f"<td>{_e(k['category'])}</td>{num}{_num(k['device_ms'], '{:.3f}')}</td>"
                 f"{num}{_num(k['count'], '{:.0f}')}</td>{num}{_num(k['share_pct'], '{:.1f}')}</td>")
        if code:
            cells += f"<td class='small'>{_model_code_cell(k.get('model_modules'), k.get('model_source'))}</td>"
        if bench:
            row = bench.get(k["kernel"]) or {}
            if row.get("headroom_pct") is not None:
                headroom = f"{row['headroom_pct']:.1f}%" + ("" if compact else f" ({row.get('headroom_method')})")
            elif row.get("error"):
                headroom = f"not measured: {row['error']}"
            else:
                headroom = row.get("headroom_method") or "not benchmarked"
            cells += (f"{num}{_num(row.get('standalone_ms'), '{:.4f}')}</td>"
                      f"{num}{_num(row.get('pct_of_peak_bandwidth'), '{:.0f}')}</td>"
                      f"<td class='small'>{_e(headroom)}</td>")
        out.append(cells + "</tr>")
    out.append("</table>")
    return out


def _model_code_cell(modules, source) -> str:
    """The kernel table's model-code cell: the model modules its time goes to (the first
    two; all of them in the tooltip) and the source line, or why there is none."""
    shown = modules_said(modules)
    if shown is None:
        return "not placed (tables/kernels.csv)"
    line = f" <code>{_e(source)}</code>" if isinstance(source, str) and source else ""
    return f"<span title='{_e(modules)}'>{_e(shown)}</span>{line}"


def _short(name: str, width: int = 70) -> str:
    """A kernel name that fits its column (the whole name is the cell's tooltip)."""
    return name if len(name) <= width else name[: width - 1] + "…"


def _rerun_section(entries: dict, folded: bool = False) -> list[str]:
    """Each job's command alone; folded (a large sweep): inside a <details> to open."""
    out: list[str] = []
    out.append("<h2 id='rerun'>Re-run one job alone</h2>" + (f"<details><summary>the {len(entries)} commands</summary>"
                                                            if folded else "") + "<ul>")
    for num, entry in sorted(entries.items()):
        out.append(f"<li>#{num}: <code>{_e(rerun_command(entry.get('overrides') or []))}</code></li>")
    out.append("</ul>" + ("</details>" if folded else "")
               + "<p>Tables: <code>tables/*.parquet</code> and <code>tables/*.csv</code> in this folder.</p>")
    return out


# A large sweep's job sections are folded: a link to one (#details-N) opens it.
_OPEN_SCRIPT = ("<script>function sweeperOpen() { var t = document.getElementById(location.hash.slice(1));"
                " if (t && t.tagName === 'DETAILS') { t.open = true; t.scrollIntoView(); } }"
                " window.addEventListener('hashchange', sweeperOpen); window.addEventListener('load', sweeperOpen);</script>")

# A large sweep's jobs table: a click on a column's head sorts by it (numbers as numbers,
# again to reverse), and the filter keeps the rows whose text holds every typed word.
_TABLE_SCRIPT = ("<script>function sweeperFilter(q) { var words = q.toLowerCase().split(/\\s+/).filter(Boolean);"
                 " var rows = document.querySelectorAll('#jobs tbody tr'), shown = 0;"
                 " rows.forEach(function (r) { var t = r.textContent.toLowerCase();"
                 " var ok = words.every(function (w) { return t.indexOf(w) >= 0; });"
                 " r.style.display = ok ? '' : 'none'; if (ok) shown++; });"
                 " document.getElementById('jobs-shown').textContent = q ? shown + ' shown' : ''; }"
                 " document.querySelectorAll('table.sortable thead th').forEach(function (th, col) {"
                 " th.style.cursor = 'pointer'; th.addEventListener('click', function () {"
                 " var body = th.closest('table').tBodies[0], rows = Array.prototype.slice.call(body.rows);"
                 " var dir = th.getAttribute('data-dir') === 'asc' ? -1 : 1; th.setAttribute('data-dir', dir > 0 ? 'asc' : 'desc');"
                 " function key(r) { var t = r.cells[col].textContent.trim(), n = parseFloat(t.replace(/[^0-9.+-]/g, ''));"
                 " return isNaN(n) ? t : n; }"
                 " rows.sort(function (a, b) { var x = key(a), y = key(b);"
                 " if (typeof x === typeof y) return (x > y ? 1 : x < y ? -1 : 0) * dir;"
                 " return (typeof x === 'number' ? -1 : 1) * dir; });"
                 " rows.forEach(function (r) { body.appendChild(r); }); }); });</script>")


# On load, the page counts the figures the browser really decoded, its tables and findings,
# and how wide it laid itself out against the window: a headless browser's DOM dump then
# shows them (tests/test_report.py), no server or driver needed.
_RENDERED_SCRIPT = ("<script>window.addEventListener('load', function () {"
               " var imgs = Array.prototype.slice.call(document.images);"
               " document.body.setAttribute('data-figures-rendered', imgs.filter(function (i) {"
               " return i.complete && i.naturalWidth > 0; }).length);"
               " document.body.setAttribute('data-tables', document.querySelectorAll('table').length);"
               " document.body.setAttribute('data-page-width', document.documentElement.scrollWidth);"
               " document.body.setAttribute('data-page-height', document.documentElement.scrollHeight);"
               " var sweep = document.querySelector('ul.findings.sweep');"
               " if (sweep) document.body.setAttribute('data-sweep-findings-height', Math.round(sweep.getBoundingClientRect().height));"
               " var first = document.getElementById('details');"
               " document.body.setAttribute('data-job-sections-y', first ? Math.round(first.getBoundingClientRect().top + window.scrollY) : -1);"
               " document.body.setAttribute('data-viewport-width', window.innerWidth);"
               " document.body.setAttribute('data-findings', document.querySelectorAll('ul.findings li').length); });"
               "</script>")
