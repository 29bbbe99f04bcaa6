"""report.html: one page per sweep that opens from the file system with no server (pure:
tables and figures in, HTML out). Its figures are embedded as data URIs, so the page is
self-contained, unless they weigh more than EMBED_MAX_BYTES (a sweep of hundreds of jobs):
then the page links them in figures/ beside it. The page's order and its first screen are
here; its sections of jobs are job_sections.py, those that compare compare_sections.py, its
HTML pieces (style, scripts, escaping, links) html_parts.py."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Mapping

import pandas as pd

from sweeper.command_line import rerun_command
from sweeper.reporting.figures import Figure
from sweeper.reporting.finding import Finding
from sweeper.reporting.load import LoadedSweep
from sweeper.reporting.overview import SMALL_SWEEP_JOBS, Overview, rule_summaries
from sweeper.reporting.html_parts import (OPEN_SCRIPT, RENDERED_SCRIPT, STYLE, TABLE_SCRIPT, esc, fmt_num, fold_close,
                                          fold_open, short)
from sweeper.reporting.compare_sections import builds_section, changed_section, compared_section, history_section
from sweeper.reporting.job_sections import failed_section, job_details_section, jobs_section, kernels_section, rerun_section
from sweeper.words import count


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
    history: Any = None  # changes_text.Changes over the nightly history ending here, or None


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
    out += history_section(view.history) if view.history is not None else []
    out += changed_section(view.comparison, view.history) if view.comparison is not None else []
    out += _findings_section(view.findings, jobs)
    out += _to_win_section(sweep.recoverable)
    out += _notes_section(view.notes)
    out += jobs_section(sweep_dir, records, jobs, entries)
    mv = view.module_view
    out += _module_view_section(mv) if mv is not None and len(mv) else []
    out += _environment(records, jobs)
    out += builds_section(view.builds, records, jobs) if view.builds else []
    out += compared_section(view.comparison) if view.comparison is not None else []
    out += failed_section(records, jobs, entries)
    out += _figures_section(view.figures, sweep_dir, view.embed_figures)
    out += kernels_section(sweep.bench, sweep.kernels)
    out += rerun_section(entries)
    out += [RENDERED_SCRIPT, "</body></html>"]
    return "\n".join(out)


def _large_page(sweep: LoadedSweep, view: ReportView) -> str:
    sweep_dir, summary, records, jobs = sweep.path, sweep.summary, sweep.records, sweep.jobs
    entries = {j["num"]: j for j in summary.get("jobs", [])}
    per_job = [f for f in view.findings if f.scope != "across jobs"]
    across = [f for f in view.findings if f.scope == "across jobs"]
    out = _header(sweep_dir, summary, records, jobs)
    out += history_section(view.history) if view.history is not None else []
    out += changed_section(view.comparison, view.history) if view.comparison is not None else []
    out += _overview_section(view.overview, across, per_job, jobs) if view.overview is not None else []
    out += _to_win_section(sweep.recoverable)
    out += _notes_section(view.notes)
    out += jobs_section(sweep_dir, records, jobs, entries, details=True)
    out += _figures_section(view.figures, sweep_dir, view.embed_figures)
    out += failed_section(records, jobs, entries)
    out += _environment(records, jobs)
    out += builds_section(view.builds, records, jobs, flagged_only=True) if view.builds else []
    out += compared_section(view.comparison, flagged_only=True) if view.comparison is not None else []
    mv = view.module_view
    out += _module_view_section(mv, large=True) if mv is not None and len(mv) else []
    out += job_details_section(sweep.bench, jobs, sweep.kernels, per_job)
    out += rerun_section(entries, folded=True)
    out += [TABLE_SCRIPT, OPEN_SCRIPT, RENDERED_SCRIPT, "</body></html>"]
    return "\n".join(out)


def _notes_section(notes: list[str]) -> list[str]:
    if not notes:
        return []
    return ["<h2 id='notes'>Read with care</h2><ul>"] + [f"<li class='note'>{esc(n)}</li>" for n in notes] + ["</ul>"]


def _header(sweep_dir: Path, summary: dict, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame) -> list[str]:
    out = [f"<!doctype html><html><head><meta charset='utf-8'><meta name='viewport' content='width=device-width, initial-scale=1'><title>sweeper report: {esc(sweep_dir.name)}</title>",
           f"<style>{STYLE}</style></head><body>",
           f"<h1>sweeper report: {esc(sweep_dir.name)}</h1>", f"<p>Folder: <code>{esc(sweep_dir)}</code></p>"]
    command = summary.get("command")
    out.append(f"<p>Command: <code>{esc(rerun_command(command or []))}</code>"
               f"<br>Started {esc(summary.get('started_at'))}"
               + (f", {esc(summary.get('elapsed_s'))} s" if summary.get("elapsed_s") is not None else "") + "; "
               f"{count(len(jobs), 'job')}: " + ", ".join(f"{n} {s}" for s, n in jobs["status"].value_counts().items()) + "</p>")
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
        f"<tr><th>{k}</th><td>{esc(env.get(k))}</td></tr>" for k in keys if env.get(k) is not None) + "</table>"]


def _overview_section(o: Overview, across: list[Finding], per_job: list[Finding], jobs: pd.DataFrame) -> list[str]:
    """The large sweep's first screen: the sweep-level sentences (overview.py, then the
    across-jobs findings, then what each per-job rule found and where it matters most),
    then its costliest jobs and kernels and its time by family and variant."""
    job_of = dict(zip(jobs["label"], jobs["job"]))
    said = o.findings + across + rule_summaries(per_job, job_of)
    dev = o.device
    out = ["<h2 id='findings'>The sweep at a glance</h2><ul class='findings sweep'>"]
    for f in said:
        out.append(f"<li data-rule='{esc(f.rule)}'>{esc(f.text)} <a href='{esc(f.link)}'>(see)</a></li>")
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
            out.append(f"<tr><td><a href='#details-{r['job']}'>{esc(r['label'])}</a></td>"
                       f"<td class='num'>{fmt_num(r['device_ms'])}</td><td class='num'>{fmt_num(r['share_pct'], '{:.1f}')}</td>"
                       f"<td class='num'>{fmt_num(r['busy_pct'], '{:.0f}')}</td><td class='num'>{fmt_num(r['speedup'])}</td>"
                       f"<td class='num'>{fmt_num(r['left_ms'], '{:.3f}')}</td></tr>")
        out.append("</table>")
    if len(o.top_kernels):
        out.append(f"<h3 id='overview-kernels'>Costliest kernels</h3><table id='top-kernels'><tr><th>kernel</th>"
                   f"<th>category</th><th>job</th><th>{dev} ms a step</th><th>% of the sweep</th>"
                   "<th>% of peak bandwidth</th><th>left to win ms</th></tr>")
        for _, k in o.top_kernels.iterrows():
            out.append(f"<tr><td><code title='{esc(short(str(k['kernel']), 300))}'>{esc(short(str(k['kernel'])))}</code></td>"
                       f"<td>{esc(k['category'])}</td><td><a href='#details-{k['job']}'>{esc(k['label'])}</a></td>"
                       f"<td class='num'>{fmt_num(k['device_ms'], '{:.3f}')}</td>"
                       f"<td class='num'>{fmt_num(k['share_pct'], '{:.2f}')}</td>"
                       f"<td class='num'>{fmt_num(k.get('pct_of_peak'), '{:.0f}')}</td>"
                       f"<td class='num'>{fmt_num(k.get('left_ms'), '{:.3f}')}</td></tr>")
        out.append("</table>")
    for name, table, col in (("families", o.by_family, "family"), ("variants", o.by_variant, "variant")):
        out.append(f"<h3 id='overview-{name}'>By model {col}</h3>" if col == "family"
                   else f"<h3 id='overview-{name}'>By variant</h3>")
        out.append(f"<table id='by-{col}'><tr><th>{col}</th><th>jobs</th><th>{dev} ms a step</th><th>% of the sweep</th>"
                   "<th>busy % (median)</th><th>speedup (median)</th></tr>")
        for _, r in table.iterrows():
            out.append(f"<tr><td>{esc(r[col])}</td><td class='num'>{r['jobs']}</td><td class='num'>{fmt_num(r['device_ms'])}</td>"
                       f"<td class='num'>{fmt_num(r['share_pct'], '{:.1f}')}</td><td class='num'>{fmt_num(r['busy_median'], '{:.0f}')}</td>"
                       f"<td class='num'>{fmt_num(r['speedup_median'])}</td></tr>")
        out.append("</table>")
    return out


def _to_win_section(recoverable: pd.DataFrame) -> list[str]:
    """The launch sites with the most left to win over the sweep (sweeper/reporting/roofline.py);
    nothing where no record has a roofline."""
    from sweeper.reporting.roofline import TOP_TO_WIN, ranking

    top = ranking(recoverable, TOP_TO_WIN) if len(recoverable) else recoverable
    if top.empty:
        return []
    out = ["<h3 id='to-win'>Most left to win</h3><table id='to-win-table'><tr><th>kernel</th><th>model code</th>"
           "<th>job</th><th>ms a step</th><th>bound ms</th><th>bound by</th><th>% of roof speed</th><th>left to win ms</th></tr>"]
    for _, r in top.iterrows():
        where = " ".join(str(x) for x in (r["module"], f"({r['source']})" if r["source"] else None) if x)
        out.append(f"<tr><td><code title='{esc(short(str(r['kernel']), 300))}'>{esc(short(str(r['kernel']), 50))}</code>"
                   f"<br><span class='small'>{esc(r['category'])}</span></td><td class='small'>{esc(where)}</td>"
                   f"<td><a href='#job-{r['job']}'>{esc(r['label'])}</a></td><td class='num'>{fmt_num(_typical(r), '{:.3f}')}"
                   f"{_outliers(r)}</td>"
                   f"<td class='num'>{fmt_num(r['bound_ms'], '{:.3f}')}</td>"
                   f"<td>{esc(r['bound_by'])}{' ' + esc(r['dtype']) if r['bound_by'] == 'compute' else ''}</td>"
                   f"<td class='num'>{fmt_num(r['efficiency_pct'], '{:.0f}')}</td>"
                   f"<td class='num'>{fmt_num(r['recoverable_ms'], '{:.3f}')}</td></tr>")
    out.append("</table><p class='small'>ms a step: the launch's time in the median profiled step (a step in which "
               "a loaded host preempted it does not move it; <sup>n</sup> counts such steps). A launch site's bound: its "
               "time at the device's measured roofs, the larger of bytes / copy bandwidth and FLOPs / the matmul peak of "
               "its dtype; % of roof speed: bound over time; left to win: its time above the bound. "
               "Every site of every job: <code>tables/recoverable.csv</code>; method: docs/method.md, \"How far each "
               "kernel is from the hardware\".</p>")
    return out


def _typical(r) -> float | None:
    """A launch's typical time a step (its median step's), or its mean in records before it."""
    v = r.get("typical_ms") if hasattr(r, "get") else None
    return r["device_ms"] if v is None or pd.isna(v) else v


def _outliers(r) -> str:
    n = r.get("outlier_runs") if hasattr(r, "get") else None
    return "" if n is None or pd.isna(n) or not n else f"<sup title='profiled steps over twice the median'>{int(n)}</sup>"


def _findings_section(findings, jobs: pd.DataFrame) -> list[str]:
    """The findings, each a sentence with its figures and a link to what shows it."""
    out = ["<h2 id='findings'>Findings</h2>"]
    if not findings:
        return out + ["<p>No rule of docs/method.md (\"Findings\") found anything in this sweep's data.</p>"]
    out.append("<ul class='findings'>")
    for f in findings:
        what = "the row" if f.link.startswith("#job-") else ("the kernels" if f.link.startswith("#kernels-") else
                                                             "the table" if f.link == "#module-view" else "the figure")
        out.append(f"<li data-rule='{esc(f.rule)}'>{esc(f.text)} <a href='{esc(f.link)}'>({what})</a></li>")
    out.append("</ul><p class='small'>Each finding comes from a rule with fixed thresholds "
               "(docs/method.md, \"Findings\"); one whose data is missing is left out.</p>")
    return out


def _module_view_section(table: pd.DataFrame, large: bool = False) -> list[str]:
    out = ["<h2 id='module-view'>Module view against the step</h2>",
           "<p>Each job's compiled modules profiled alone (the view <code>python &lt;module&gt;.py -p</code> "
           "gives) against its real step: the category where their shares differ most. Over 1.5 points, a "
           "finding says so; read the step's shares for that job.</p>",
           fold_open(len(table), large, "every job's row"),
           "<table id='module-view-table'><tr><th>job</th><th>category</th><th>modules %</th><th>step %</th>"
           "<th>difference (points)</th></tr>"]
    for _, r in table.iterrows():
        out.append(f"<tr><td>{esc(r['label'])}</td><td>{esc(r['category'])}</td>"
                   f"<td class='num'>{fmt_num(r['module_view_pct'], '{:.1f}')}</td><td class='num'>{fmt_num(r['step_pct'], '{:.1f}')}</td>"
                   f"<td class='num'>{fmt_num(r['difference_pp'], '{:+.2f}')}</td></tr>")
    return out + ["</table>" + fold_close(len(table), large)]


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
            out.append(f"<figure id='fig-{f.name}'><img alt='{esc(f.title)}' src='{esc(src)}'>"
                       f"<figcaption>{esc(f.title)}</figcaption></figure>")
        else:
            out.append(f"<p class='note' id='fig-{f.name}'>{esc(f.title)}: not drawn: {esc(f.note)}</p>")
    return out


