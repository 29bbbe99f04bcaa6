"""The report's sections a job: the jobs table, each job's details, failed jobs, the costliest
kernels, the re-run commands (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from sweeper.analysis.module_rollup import modules_said
from sweeper.command_line import rerun_command
from sweeper.reporting import tables
from sweeper.reporting.compile_state import state_of
from sweeper.reporting.figures import device_word
from sweeper.reporting.finding import Finding
from sweeper.reporting.html_parts import esc, fmt_num, link, log_of, short
from sweeper.words import count


def job_details_section(bench: pd.DataFrame, jobs: pd.DataFrame, kernels: pd.DataFrame,
                         found: list[Finding]) -> list[str]:
    """A section a job, folded (one line each, opened by a click or by a link to it): its
    findings, then its costliest kernels (KERNELS_PER_JOB_LARGE)."""
    by_label: dict[str, list[Finding]] = {}
    for f in found:
        by_label.setdefault(f.scope, []).append(f)
    step = kernels[kernels["scope"] == "step"]
    step_of = {j: g for j, g in step.groupby("job", sort=False)}
    benched = benched_kernels(bench)
    out = ["<h2 id='details'>Each job</h2><p>Each job's findings and its costliest kernels of the compiled step, "
           "a line a job: click to open (a link from the jobs table or the overview opens it). Every kernel: "
           "<code>tables/kernels.csv</code>.</p>"]
    for _, r in jobs.iterrows():
        mine = by_label.get(r["label"], [])
        rules = ", ".join(dict.fromkeys(f.rule.replace("_", " ") for f in mine if f.rule != "where_time_goes"))
        out.append(f"<details class='job' id='details-{r['job']}'><summary>#{r['job']} {esc(r['label'])} "
                   f"<span class='small'>({esc(r['status'])}{'; ' + esc(rules) if rules else ''}; "
                   f"<a href='#job-{r['job']}'>its row</a>)</span></summary>")
        if mine:
            out.append("<ul class='findings job'>" + "".join(
                f"<li data-rule='{esc(f.rule)}'>{esc(f.text)}</li>" for f in mine) + "</ul>")
        rows = step_of.get(r["job"])
        if rows is not None and len(rows):
            out += kernel_table(r["job"], rows, benched.get(r["job"]) or {}, KERNELS_PER_JOB_LARGE, heading=False)
        out.append("</details>")
    return out


# The jobs table's figure columns: (header, column, format). A column no job has a value
# in (NVML and peak memory on a CPU; busy where nothing was profiled) is left out.
# "compiled ms" is the median of the timed steps (the findings' step), "loop ms" the mean
# over the steady loop (what a comparison between sweeps judges).
JOB_FIGURES = [("compile s", "compile_s", "{:.1f}"), ("eager ms", "eager_step_ms", "{:.2f}"),
                ("compiled ms", "compiled_step_ms", "{:.2f}"), ("loop ms", "steady_step_ms", "{:.2f}"),
                ("speedup", "speedup", "{:.2f}"),
                ("peak MiB", "peak_memory_mb", "{:.0f}"), ("{dev} busy %", "busy_pct", "{:.1f}"),
                ("NVML util %", "nvml_util_pct", "{:.1f}"), ("busy % (as -p)", "busy_pct_reference_style", "{:.1f}"),
                ("other cores busy", "host_busy_cores", "{:.1f}"), ("rounds IQR %", "timing_iqr_pct", "{:.0f}"),
                ("launch µs", "launch_us", "{:.2f}")]


def jobs_section(sweep_dir: Path, records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame, entries: dict,
                  details: bool = False) -> list[str]:
    """The jobs table. details: each label links to the job's section, and the table
    sorts by a click on a column's head and filters by what is typed above it."""
    dev = device_word(jobs)
    shown = [(h.format(dev=dev), c, f) for h, c, f in JOB_FIGURES if c in jobs and jobs[c].notna().any()]
    out = ["<h2 id='summary'>Jobs</h2>"]
    if details:
        out.append(f"<p class='small'>{count(len(jobs), 'job')}. Click a column's head to sort; type to keep the rows that "
                   "hold the text: <input id='jobs-filter' type='search' placeholder='densenet autotune' "
                   "oninput='sweeperFilter(this.value)'> <span id='jobs-shown'></span></p>")
    out.append("<table id='jobs' class='sortable'><thead><tr><th>#</th><th>job</th><th>status</th>"
               + "".join(f"<th>{esc(h)}</th>" for h, _, _ in shown) + "<th>traces</th><th>log</th></tr></thead><tbody>")
    for _, r in jobs.iterrows():
        rec = records.get(r["job"], {})
        traces = (rec.get("artifacts") or {}).get("traces") or {}
        storage = (rec.get("job") or {}).get("storage")
        links = " ".join(link(p, sweep_dir, name, storage) for name, p in traces.items()) or "–"
        name = f"<a href='#details-{r['job']}'>{esc(r['label'])}</a>" if details else esc(r["label"])
        out.append(
            f"<tr id='job-{r['job']}' class='{esc(r['status'])}'><td>{r['job']}</td><td>{name}</td><td>{esc(r['status'])}</td>"
            + "".join(f"<td class='num'>{fmt_num(r[c], f)}{compile_state_mark(r) if c == 'compile_s' else ''}</td>"
                      for _, c, f in shown)
            + f"<td>{links}</td><td>{link(log_of(r, entries), sweep_dir, 'job.log', storage)}</td></tr>")
    out.append("</tbody></table>")
    return out


def compile_state_mark(row: pd.Series) -> str:
    """After a compile time that is not a cold compile's: why (reporting/compile_state.py), and
    the compile seconds of the job's earlier, stopped runs that this one went on from."""
    state = state_of(row)
    built = row.get("cpp_builds")
    if state == "warm" and built is not None and pd.notna(built) and built > 0:  # a CPU's, libraries of another host
        state = f"warm; {int(built)} C++ files built again"
    out = "" if state == "cold" else f" <span class='note' title='{esc(tables.JOB_COLUMNS['compile_state'])}'>({state})</span>"
    before = row.get("compile_s_before")
    if before is not None and pd.notna(before):
        out += (f" <span class='note' title='{esc(tables.JOB_COLUMNS['compile_s_before'])}'>"
                f"(+{before:.1f} s in earlier stopped runs)</span>")
    return out


def failed_section(records: Mapping[int, Mapping[str, Any]], jobs: pd.DataFrame, entries: dict) -> list[str]:
    out: list[str] = []
    bad = jobs[jobs["status"] != "ok"]
    if len(bad):
        out.append("<h2 id='failed'>Failed, skipped and cancelled jobs</h2><table id='failed-jobs'>"
                   "<tr><th>#</th><th>job</th><th>status</th><th>phase</th><th>reason</th><th>log</th>"
                   "<th>re-run alone</th></tr>")
        for _, r in bad.iterrows():
            overrides = entries.get(r["job"], {}).get("overrides") or (records.get(r["job"], {}).get("job") or {}).get("overrides") or []
            out.append(f"<tr class='{esc(r['status'])}'><td>{r['job']}</td><td>{esc(r['label'])}</td><td>{esc(r['status'])}</td>"
                       f"<td>{esc(r['phase'])}</td><td>{esc(r['reason'])}</td>"
                       f"<td>{esc(log_of(r, entries) or entries.get(r['job'], {}).get('log_note') or 'no log')}</td>"
                       f"<td><code>{esc(rerun_command(overrides))}</code></td></tr>")
        out.append("</table>")
    return out


KERNELS_PER_JOB = 10


KERNELS_PER_JOB_LARGE = 5  # a large sweep's job sections: every kernel is in tables/kernels.csv


def benched_kernels(bench: pd.DataFrame) -> dict[int, dict[str, dict]]:
    """Job -> kernel name -> its microbenchmark row (tables.microbench_table), empty cells None."""
    out: dict[int, dict[str, dict]] = {}
    if bench.empty:
        return out
    for r in bench.astype(object).where(bench.notna(), None).to_dict("records"):
        if r.get("standalone_ms") is not None or r.get("headroom_method"):
            out.setdefault(r["job"], {})[r["kernel"]] = r
    return out


def kernels_section(bench: pd.DataFrame, kernels: pd.DataFrame) -> list[str]:
    """Each job's costliest kernels of its compiled step, a table a job; the
    microbenchmark columns only where a job has microbenchmarks (a GPU job)."""
    out = ["<h2 id='kernels'>Costliest kernels of each job (compiled step)</h2>"]
    step = kernels[kernels["scope"] == "step"]
    if step.empty:
        return out + ["<p class='note'>No kernel table: no finished job has a profiled step.</p>"]
    benched = benched_kernels(bench)
    if any(benched.values()):
        out.append("<p>Alone: one launch of the job's own kernel on its file's inputs (L2 flushed), with the "
                   "bandwidth it reached against the job's measured peak (device-to-device copy); headroom: the "
                   "chosen config against the best candidate config. Every benchmarked kernel: "
                   "<code>tables/microbench.csv</code>; every kernel: <code>tables/kernels.csv</code>.</p>")
    else:
        out.append("<p>Every kernel: <code>tables/kernels.csv</code>.</p>")
    for job, rows in step.groupby("job", sort=True):
        out += kernel_table(job, rows, benched.get(job) or {}, KERNELS_PER_JOB)
    return out


def kernel_table(job, rows: pd.DataFrame, bench: Mapping[str, Mapping[str, Any]], top_n: int,
                  heading: bool = True) -> list[str]:
    """One job's costliest `top_n` kernels; the microbenchmark columns where it has any.
    Without heading (a large sweep's job section) the table is compact: a name's tooltip
    only where the name is cut, the headroom without its method (tables/microbench.csv has
    it), numbers right-aligned by the table's class rather than each cell's."""
    top = rows.sort_values("device_ms", ascending=False).head(top_n)
    compact = not heading
    num = "<td>" if compact else "<td class='num'>"
    code = "model_modules" in top and bool(top["model_modules"].notna().any())  # records with their model code
    out = [f"<h3 id='kernels-{job}'>{esc(top['label'].iloc[0])}</h3>" if heading else "",
           f"<table class='kernel-table{' compact' if compact else ''}'{f' id=kernels-{job}' if compact else ''}>"
           "<tr><th>kernel</th><th>category</th><th>ms per step</th><th>launches</th><th>share %</th>"
           + ("<th>model code</th>" if code else "")
           + ("<th>alone ms</th><th>% of peak bandwidth</th><th>autotune headroom</th>" if bench else "")
           + "</tr>"]
    for _, k in top.iterrows():
        name = str(k["kernel"])
        title = f" title='{esc(short(name, 300))}'" if not compact or len(name) > 70 else ""
        cells = (f"<tr><td><code{title}>{esc(short(name))}</code></td>"
                 f"<td>{esc(k['category'])}</td>{num}{fmt_num(k['device_ms'], '{:.3f}')}</td>"
                 f"{num}{fmt_num(k['count'], '{:.0f}')}</td>{num}{fmt_num(k['share_pct'], '{:.1f}')}</td>")
        if code:
            cells += f"<td class='small'>{model_code_cell(k.get('model_modules'), k.get('model_source'))}</td>"
        if bench:
            row = bench.get(k["kernel"]) or {}
            if row.get("headroom_pct") is not None:
                headroom = f"{row['headroom_pct']:.1f}%" + ("" if compact else f" ({row.get('headroom_method')})")
            elif row.get("error"):
                headroom = f"not measured: {row['error']}"
            else:
                headroom = row.get("headroom_method") or "not benchmarked"
            cells += (f"{num}{fmt_num(row.get('standalone_ms'), '{:.4f}')}</td>"
                      f"{num}{fmt_num(row.get('pct_of_peak_bandwidth'), '{:.0f}')}</td>"
                      f"<td class='small'>{esc(headroom)}</td>")
        out.append(cells + "</tr>")
    out.append("</table>")
    return out


def model_code_cell(modules, source) -> str:
    """The kernel table's model-code cell: the model modules its time goes to (the first
    two; all of them in the tooltip) and the source line, or why there is none."""
    shown = modules_said(modules)
    if shown is None:
        return "not placed (tables/kernels.csv)"
    line = f" <code>{esc(source)}</code>" if isinstance(source, str) and source else ""
    return f"<span title='{esc(modules)}'>{esc(shown)}</span>{line}"


def rerun_section(entries: dict, folded: bool = False) -> list[str]:
    """Each job's command alone; folded (a large sweep): inside a <details> to open."""
    out: list[str] = []
    out.append("<h2 id='rerun'>Re-run one job alone</h2>" + (f"<details><summary>the {len(entries)} commands</summary>"
                                                            if folded else "") + "<ul>")
    for num, entry in sorted(entries.items()):
        out.append(f"<li>#{num}: <code>{esc(rerun_command(entry.get('overrides') or []))}</code></li>")
    out.append("</ul>" + ("</details>" if folded else "")
               + "<p>Tables: <code>tables/*.parquet</code> and <code>tables/*.csv</code> in this folder.</p>")
    return out
