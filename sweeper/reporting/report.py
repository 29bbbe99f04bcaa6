"""report.html: one self-contained page per sweep (figures embedded as data URIs), that
opens from the file system with no server (pure: tables and figures in, HTML out)."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from sweeper.reporting import tables
from sweeper.reporting.figures import Figure, device_word
from sweeper.command_line import rerun_command

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


def render(sweep_dir: Path, summary: dict, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame,
           kernels: pd.DataFrame, figures: list[Figure], notes: list[str], comparison=None, builds=(),
           findings=(), module_view: pd.DataFrame | None = None) -> str:
    """The page. Its first screen answers: what changed since the earlier sweep of the same
    grid (when there is one), then the findings (sweeper/reporting/findings.py), each
    linked to its row or figure; then what to read with care (notes), the jobs, each job's
    module view against its step, the environment, the builds compared within the sweep
    (python=a,b), the comparison in full, failed jobs, figures, costliest kernels, re-runs."""
    entries = {j["num"]: j for j in summary.get("jobs", [])}
    out = _header(sweep_dir, summary, records, jobs)
    out += _changed_section(comparison) if comparison is not None else []
    out += _findings_section(findings, jobs)
    if notes:
        out += ["<h2 id='notes'>Read with care</h2><ul>"] + [f"<li class='note'>{_e(n)}</li>" for n in notes] + ["</ul>"]
    out += _jobs_section(sweep_dir, records, jobs, entries)
    out += _module_view_section(module_view) if module_view is not None and len(module_view) else []
    out += _environment(records, jobs)
    out += _builds_section(builds, records, jobs) if builds else []
    out += _compared_section(comparison) if comparison is not None else []
    out += _failed_section(records, jobs, entries)
    out += _figures_section(figures)
    out += _kernels_section(records, kernels)
    out += _rerun_section(entries)
    out += [_RENDERED_SCRIPT, "</body></html>"]
    return "\n".join(out)


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
    out = [f"<h2 id='changed'>What changed since {_e(cmp.old.path.name)}</h2>",
           f"<p>{len(flagged)} of {len(both)} jobs flagged against <code>{_e(cmp.old.path)}</code>"
           f" (<a href='#compared'>the comparison</a>)." + ("" if len(flagged) else " Nothing moved beyond its noise.")
           + "</p>"]
    unjudged = both[both["verdict"] == "cannot judge"]
    if len(unjudged):
        out.append(f"<p class='note'>{len(unjudged)} jobs could not be judged: their noise hides any change "
                   f"({_e(', '.join(unjudged['label']))}).</p>")
    if len(flagged):
        out.append("<ul>")
        for _, r in flagged.iterrows():
            d = cmp.details.get(r["key"])
            moved = ""
            if d is not None and not d.kernels.empty:
                k = d.kernels.iloc[0]
                moved = (f"; most moved kernel: <code>{_e(_short(str(k['kernel']), 60))}</code> "
                         f"{_num(k['change_pct'], '{:+.0f}')}% ({_e(k['change'])})")
            out.append(f"<li>{_e(r['label'])}: {_e(r['verdict'])} ({_e(r['why'])}), step "
                       f"{_num(r['step_change_pct'], '{:+.1f}')}%, kernels {_num(r['device_change_pct'], '{:+.1f}')}%"
                       f"{moved}</li>")
        out.append("</ul>")
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


def _module_view_section(table: pd.DataFrame) -> list[str]:
    out = ["<h2 id='module-view'>Module view against the step</h2>",
           "<p>Each job's compiled modules profiled alone (the view <code>python &lt;module&gt;.py -p</code> "
           "gives) against its real step: the category where their shares differ most. Over 1.5 points, a "
           "finding says so; read the step's shares for that job.</p>",
           "<table id='module-view-table'><tr><th>job</th><th>category</th><th>modules %</th><th>step %</th>"
           "<th>difference (points)</th></tr>"]
    for _, r in table.iterrows():
        out.append(f"<tr><td>{_e(r['label'])}</td><td>{_e(r['category'])}</td>"
                   f"<td class='num'>{_num(r['module_view_pct'], '{:.1f}')}</td><td class='num'>{_num(r['step_pct'], '{:.1f}')}</td>"
                   f"<td class='num'>{_num(r['difference_pp'], '{:+.2f}')}</td></tr>")
    return out + ["</table>"]


# The jobs table's figure columns: (header, column, format). A column no job has a value
# in (NVML and peak memory on a CPU; busy where nothing was profiled) is left out.
_JOB_FIGURES = [("compile s", "compile_s", "{:.1f}"), ("eager ms", "eager_step_ms", "{:.2f}"),
                ("compiled ms", "compiled_step_ms", "{:.2f}"), ("speedup", "speedup", "{:.2f}"),
                ("peak MiB", "peak_memory_mb", "{:.0f}"), ("{dev} busy %", "busy_pct", "{:.1f}"),
                ("NVML util %", "nvml_util_pct", "{:.1f}"), ("busy % (as -p)", "busy_pct_reference_style", "{:.1f}"),
                ("other cores busy", "host_busy_cores", "{:.1f}"), ("rounds IQR %", "timing_iqr_pct", "{:.0f}"),
                ("launch µs", "launch_us", "{:.2f}")]


def _jobs_section(sweep_dir: Path, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame, entries: dict) -> list[str]:
    dev = device_word(jobs)
    shown = [(h.format(dev=dev), c, f) for h, c, f in _JOB_FIGURES if c in jobs and jobs[c].notna().any()]
    out = ["<h2 id='summary'>Jobs</h2><table id='jobs'><tr><th>#</th><th>job</th><th>status</th>"
           + "".join(f"<th>{_e(h)}</th>" for h, _, _ in shown) + "<th>traces</th><th>log</th></tr>"]
    for _, r in jobs.iterrows():
        rec = records.get(r["job"], {})
        traces = (rec.get("artifacts") or {}).get("traces") or {}
        links = " ".join(_link(p, sweep_dir, name) for name, p in traces.items()) or "–"
        out.append(
            f"<tr id='job-{r['job']}' class='{_e(r['status'])}'><td>{r['job']}</td><td>{_e(r['label'])}</td><td>{_e(r['status'])}</td>"
            + "".join(f"<td class='num'>{_num(r[c], f)}{_compile_state_mark(r) if c == 'compile_s' else ''}</td>"
                      for _, c, f in shown)
            + f"<td>{links}</td><td>{_link(_log_of(r, entries), sweep_dir, 'job.log')}</td></tr>")
    out.append("</table>")
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


def _builds_section(builds, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame) -> list[str]:
    """The environments the jobs ran in, then each later build against the first."""
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
                                       "pairs flagged.", level=3, table_id="build-comparison")
    return out


def _compared_section(cmp, heading: str | None = None, intro: str | None = None, level: int = 2,
                      table_id: str = "comparison") -> list[str]:
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
           f"<table id='{table_id}'><tr><th>job</th><th>step ms before → now</th><th>change %</th><th>noise ±%</th>"
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
    out.append("</table>")
    for key, d in cmp.details.items():
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


def _figures_section(figures: list[Figure]) -> list[str]:
    out: list[str] = []
    out.append("<h2 id='figures'>Figures</h2>")
    for f in figures:
        if f.path is not None and Path(f.path).exists():
            data = base64.b64encode(Path(f.path).read_bytes()).decode()
            out.append(f"<figure id='fig-{f.name}'><img alt='{_e(f.title)}' src='data:image/png;base64,{data}'>"
                       f"<figcaption>{_e(f.title)}</figcaption></figure>")
        else:
            out.append(f"<p class='note' id='fig-{f.name}'>{_e(f.title)}: not drawn: {_e(f.note)}</p>")
    return out


KERNELS_PER_JOB = 10


def _kernels_section(records: Mapping[int, Mapping[str, Any]], kernels: pd.DataFrame) -> list[str]:
    """Each job's costliest kernels of its compiled step, a table a job; the
    microbenchmark columns only where a job has microbenchmarks (a GPU job)."""
    out = ["<h2 id='kernels'>Costliest kernels of each job (compiled step)</h2>"]
    step = kernels[kernels["scope"] == "step"]
    if step.empty:
        return out + ["<p class='note'>No kernel table: no finished job has a profiled step.</p>"]
    benched = {n: {r["name"]: r for r in ((rec.get("kernel_table") or {}).get("rows") or [])
                   if r.get("standalone_ms") is not None or r.get("headroom_method")}
               for n, rec in records.items()}
    if any(benched.values()):
        out.append("<p>Alone: one launch of the job's own kernel on its file's inputs (L2 flushed), with the "
                   "bandwidth it reached against the job's measured peak (device-to-device copy); headroom: the "
                   "chosen config against the best candidate config. Every benchmarked kernel: "
                   "<code>tables/microbench.csv</code>; every kernel: <code>tables/kernels.csv</code>.</p>")
    else:
        out.append("<p>Every kernel: <code>tables/kernels.csv</code>.</p>")
    for job, rows in step.groupby("job", sort=True):
        bench = benched.get(job) or {}
        top = rows.sort_values("device_ms", ascending=False).head(KERNELS_PER_JOB)
        out.append(f"<h3 id='kernels-{job}'>{_e(top['label'].iloc[0])}</h3><table class='kernel-table'><tr><th>kernel</th>"
                   "<th>category</th><th>ms per step</th><th>launches</th><th>share %</th>"
                   + ("<th>alone ms</th><th>% of peak bandwidth</th><th>autotune headroom</th>" if bench else "")
                   + "</tr>")
        for _, k in top.iterrows():
            cells = (f"<tr><td><code title='{_e(k['kernel'])}'>{_e(_short(str(k['kernel'])))}</code></td>"
                     f"<td>{_e(k['category'])}</td><td class='num'>{_num(k['device_ms'], '{:.3f}')}</td>"
                     f"<td class='num'>{_num(k['count'], '{:.0f}')}</td><td class='num'>{_num(k['share_pct'], '{:.1f}')}</td>")
            if bench:
                row = bench.get(k["kernel"]) or {}
                if row.get("headroom_pct") is not None:
                    headroom = f"{row['headroom_pct']:.1f}% ({row.get('headroom_method')})"
                elif row.get("error"):
                    headroom = f"not measured: {row['error']}"
                else:
                    headroom = row.get("headroom_method") or "not benchmarked"
                cells += (f"<td class='num'>{_num(row.get('standalone_ms'), '{:.4f}')}</td>"
                          f"<td class='num'>{_num(row.get('pct_of_peak_bandwidth'), '{:.0f}')}</td>"
                          f"<td class='small'>{_e(headroom)}</td>")
            out.append(cells + "</tr>")
        out.append("</table>")
    return out


def _short(name: str, width: int = 70) -> str:
    """A kernel name that fits its column (the whole name is the cell's tooltip)."""
    return name if len(name) <= width else name[: width - 1] + "…"


def _rerun_section(entries: dict) -> list[str]:
    out: list[str] = []
    out.append("<h2 id='rerun'>Re-run one job alone</h2><ul>")
    for num, entry in sorted(entries.items()):
        out.append(f"<li>#{num}: <code>{_e(rerun_command(entry.get('overrides') or []))}</code></li>")
    out.append("</ul><p>Tables: <code>tables/*.parquet</code> and <code>tables/*.csv</code> in this folder.</p>")
    return out


# On load, the page counts the figures the browser really decoded, its tables and findings,
# and how wide it laid itself out against the window: a headless browser's DOM dump then
# shows them (tests/test_report.py), no server or driver needed.
_RENDERED_SCRIPT = ("<script>window.addEventListener('load', function () {"
               " var imgs = Array.prototype.slice.call(document.images);"
               " document.body.setAttribute('data-figures-rendered', imgs.filter(function (i) {"
               " return i.complete && i.naturalWidth > 0; }).length);"
               " document.body.setAttribute('data-tables', document.querySelectorAll('table').length);"
               " document.body.setAttribute('data-page-width', document.documentElement.scrollWidth);"
               " document.body.setAttribute('data-viewport-width', window.innerWidth);"
               " document.body.setAttribute('data-findings', document.querySelectorAll('ul.findings li').length); });"
               "</script>")
