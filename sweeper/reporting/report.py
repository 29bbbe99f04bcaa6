"""report.html: one self-contained page per sweep (figures embedded as data URIs), that
opens from the file system with no server (pure: tables and figures in, HTML out)."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

import pandas as pd

from sweeper.reporting.figures import Figure
from sweeper.sweep.summary import rerun_command

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 1300px; color: #222; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.failed { background: #fde8e8; } .skipped { background: #fff6db; } .cancelled { background: #eee; }
.note { color: #805b00; } code { background: #f5f5f5; padding: 1px 4px; }
figure { margin: 1em 0 2em; } img { max-width: 100%; border: 1px solid #ddd; }
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
    if not _text(path):
        return "–"
    try:
        href = os.path.relpath(path, sweep_dir)  # relative: the folder can be copied elsewhere
    except ValueError:
        href = path
    return f'<a href="{_e(href)}">{_e(text)}</a>'


def render(sweep_dir: Path, summary: dict, records: dict[int, dict], jobs: pd.DataFrame,
           kernels: pd.DataFrame, figures: list[Figure], notes: list[str]) -> str:
    """The page: header, notes, jobs, failed jobs, figures, costliest kernels, re-runs."""
    entries = {j["num"]: j for j in summary.get("jobs", [])}
    out = _header(sweep_dir, summary, records, jobs)
    out += [f"<p class='note'>Note: {_e(note)}</p>" for note in notes]
    out += _jobs_section(sweep_dir, records, jobs, entries)
    out += _failed_section(records, jobs, entries)
    out += _figures_section(figures)
    out += _kernels_section(records, kernels)
    out += _rerun_section(entries)
    out += [_RENDERED_SCRIPT, "</body></html>"]
    return "\n".join(out)


def _header(sweep_dir: Path, summary: dict, records: dict[int, dict], jobs: pd.DataFrame) -> list[str]:
    ok = jobs[jobs["status"] == "ok"]
    env = next((records[n].get("environment") or {} for n in ok["job"] if n in records), {})
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>sweeper report: {_e(sweep_dir.name)}</title>",
           f"<style>{_STYLE}</style></head><body>",
           f"<h1>sweeper report: {_e(sweep_dir.name)}</h1>", f"<p>Folder: <code>{_e(sweep_dir)}</code></p>"]
    command = summary.get("command")
    out.append(f"<p>Command: <code>{_e(rerun_command(command or []))}</code>"
               f"<br>Started {_e(summary.get('started_at'))}"
               + (f", {_e(summary.get('elapsed_s'))} s" if summary.get("elapsed_s") is not None else "") + "; "
               f"{len(jobs)} jobs: " + ", ".join(f"{n} {s}" for s, n in jobs["status"].value_counts().items()) + "</p>")
    if env:
        keys = ("gpu", "gpu_count", "driver", "cuda", "torch", "triton", "timm", "python", "host", "cpu_count")
        out.append("<h2>Environment</h2><table>" + "".join(
            f"<tr><th>{k}</th><td>{_e(env.get(k))}</td></tr>" for k in keys if env.get(k) is not None) + "</table>")
    return out


def _jobs_section(sweep_dir: Path, records: dict[int, dict], jobs: pd.DataFrame, entries: dict) -> list[str]:
    out: list[str] = []
    out.append("<h2 id='summary'>Jobs</h2><table id='jobs'><tr><th>#</th><th>job</th><th>status</th>"
               "<th>compile s</th><th>eager ms</th><th>compiled ms</th><th>speedup</th><th>peak MiB</th>"
               "<th>busy %</th><th>NVML util %</th><th>busy % (as -p)</th><th>other cores busy</th><th>rounds IQR %</th><th>launch µs</th><th>traces</th><th>log</th></tr>")
    for _, r in jobs.iterrows():
        rec = records.get(r["job"], {})
        traces = (rec.get("artifacts") or {}).get("traces") or {}
        links = " ".join(_link(p, sweep_dir, name) for name, p in traces.items()) or "–"
        out.append(
            f"<tr class='{_e(r['status'])}'><td>{r['job']}</td><td>{_e(r['label'])}</td><td>{_e(r['status'])}</td>"
            f"<td class='num'>{_num(r['compile_s'], '{:.1f}')}</td><td class='num'>{_num(r['eager_step_ms'])}</td>"
            f"<td class='num'>{_num(r['compiled_step_ms'])}</td><td class='num'>{_num(r['speedup'])}</td>"
            f"<td class='num'>{_num(r['peak_memory_mb'], '{:.0f}')}</td><td class='num'>{_num(r['busy_pct'], '{:.1f}')}</td>"
            f"<td class='num'>{_num(r['nvml_util_pct'], '{:.1f}')}</td>"
            f"<td class='num'>{_num(r['busy_pct_reference_style'], '{:.1f}')}</td>"
            f"<td class='num'>{_num(r['host_busy_cores'], '{:.1f}')}</td>"
            f"<td class='num'>{_num(r['timing_iqr_pct'], '{:.0f}')}</td>"
            f"<td class='num'>{_num(r['launch_us'], '{:.2f}')}</td><td>{links}</td>"
            f"<td>{_link(_log_of(r, entries), sweep_dir, 'job.log')}</td></tr>")
    out.append("</table>")
    return out


def _failed_section(records: dict[int, dict], jobs: pd.DataFrame, entries: dict) -> list[str]:
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


def _kernels_section(records: dict[int, dict], kernels: pd.DataFrame) -> list[str]:
    out: list[str] = []
    out.append("<h2 id='kernels'>Costliest kernels (compiled step)</h2>")
    step = kernels[kernels["scope"] == "step"].sort_values("device_ms", ascending=False).head(20)
    if step.empty:
        out.append("<p class='note'>No kernel table: no finished job has a profiled step.</p>")
    else:
        out.append("<p>Alone: one launch of the job's own kernel on its file's inputs (L2 flushed), with the "
                   "bandwidth it reached against the job's measured peak (device-to-device copy); headroom: the "
                   "chosen config against the best candidate config. Every benchmarked kernel: "
                   "<code>tables/microbench.csv</code>.</p>")
        out.append("<table id='kernel-table'><tr><th>job</th><th>kernel</th><th>category</th><th>ms per step</th>"
                   "<th>launches</th><th>share of step device time %</th><th>alone ms</th>"
                   "<th>% of peak bandwidth</th><th>autotune headroom</th></tr>")
        for _, k in step.iterrows():
            bench = {r["name"]: r for r in ((records.get(k["job"], {}).get("kernel_table") or {}).get("rows") or [])}
            row = bench.get(k["kernel"]) or {}
            if row.get("headroom_pct") is not None:
                headroom = f"{row['headroom_pct']:.1f}% ({row.get('headroom_method')})"
            elif row.get("error"):
                headroom = f"not measured: {row['error']}"
            else:
                headroom = row.get("headroom_method") or "not measured"
            out.append(f"<tr><td>{_e(k['label'])}</td><td><code>{_e(str(k['kernel'])[:120])}</code></td>"
                       f"<td>{_e(k['category'])}</td><td class='num'>{_num(k['device_ms'], '{:.3f}')}</td>"
                       f"<td class='num'>{_num(k['count'], '{:.0f}')}</td><td class='num'>{_num(k['share_pct'], '{:.1f}')}</td>"
                       f"<td class='num'>{_num(row.get('standalone_ms'), '{:.4f}')}</td>"
                       f"<td class='num'>{_num(row.get('pct_of_peak_bandwidth'), '{:.0f}')}</td>"
                       f"<td>{_e(headroom)}</td></tr>")
        out.append("</table>")
    return out


def _rerun_section(entries: dict) -> list[str]:
    out: list[str] = []
    out.append("<h2 id='rerun'>Re-run one job alone</h2><ul>")
    for num, entry in sorted(entries.items()):
        out.append(f"<li>#{num}: <code>{_e(rerun_command(entry.get('overrides') or []))}</code></li>")
    out.append("</ul><p>Tables: <code>tables/*.parquet</code> and <code>tables/*.csv</code> in this folder.</p>")
    return out


# On load, the page counts the figures the browser really decoded: a headless browser's
# DOM dump then shows them (tests/test_report.py), no server or driver needed.
_RENDERED_SCRIPT = ("<script>window.addEventListener('load', function () {"
               " var imgs = Array.prototype.slice.call(document.images);"
               " document.body.setAttribute('data-figures-rendered', imgs.filter(function (i) {"
               " return i.complete && i.naturalWidth > 0; }).length);"
               " document.body.setAttribute('data-tables', document.querySelectorAll('table').length); });</script>")
