"""What a sweep's figures say, in sentences: the report's first screen (pure: tables in,
findings out). No model writes them: each comes from one rule with fixed thresholds
(docs/method.md, "Findings"), and a finding whose data is missing is left out, never
guessed. Each one quotes its figures and links to the table row or figure that shows them.

Rules, per job and across jobs:
- accuracy_failed: a finished job whose compiled step failed the check against eager
  (tasks/accuracy.py), before anything else: its figures are of another computation.
- (sweeper/reporting/model_code.py: where in the model, then) where_time_goes: every
  finished job: the category that holds most of its step's
  device time (GPU or CPU), its costliest kernel, the next category, and the compiled step
  against eager: the answer, before any caveat.
- launch_bound: a GPU step kept busy under LAUNCH_BUSY_PCT with LAUNCH_MIN_KERNELS or more
  kernels a step averaging under LAUNCH_MEAN_US; with what its CUDA-graphs twin did.
- layout_conversions: LAYOUT_MIN_SHARE_PCT or more of a GPU step in layout transforms
  (cuDNN's NCHW/NHWC conversions, ATen's strided copies, Inductor's clone kernels).
- autotune: each pair that differs only in max-autotune: the step's speedup, what the
  templates took over by op kind, the compile seconds paid per millisecond saved a step
  and the steps that pay them back; with where the time goes without it.
- memory_bound: the costliest benchmarked Triton kernels under MEMORY_MAX_PEAK_PCT of the
  measured peak bandwidth, with the config headroom microbenchmarks found.
- across_runs: a job whose share of a category stands ACROSS_MIN_PP points or more from
  the other jobs' median; and the busy figures side by side.
- module_view: a job whose modules' own view (as `python <module>.py -p` shows it)
  disagrees with its step by more than MODULE_VIEW_MAX_PP points in some category.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.analysis.categories import CATEGORIES, category_label
from sweeper.reporting.finding import Finding, by_job, ms_text, number, ok_jobs, on_gpu, rows_of, short_name
from sweeper.reporting.kernel_findings import autotune, layout_conversions, memory_bound
from sweeper.reporting.pairs import one_key_pairs
from sweeper.words import count

LAUNCH_BUSY_PCT = 50.0
LAUNCH_MIN_KERNELS = 200
LAUNCH_MEAN_US = 20.0
ACROSS_MIN_PP = 15.0
ACROSS_TOP = 3  # the categories that stand out most
BUSY_LISTED = 12  # jobs whose busy figures a finding lists side by side; more: their spread
MODULE_VIEW_MAX_PP = 1.5


def where_time_goes(jobs: pd.DataFrame, cats: pd.DataFrame, kernels: pd.DataFrame) -> list[Finding]:
    out = []
    step_cats, step_kernels = cats[cats["scope"] == "step"], kernels[kernels["scope"] == "step"]
    cats_of, kernels_of = by_job(step_cats), by_job(step_kernels)
    for _, r in ok_jobs(jobs).iterrows():
        mine = rows_of(cats_of, r["job"], step_cats).sort_values("share_pct", ascending=False)
        mine = mine[mine["share_pct"] > 0]
        if mine.empty:
            continue
        dev = "GPU" if on_gpu(r) else "CPU"
        top, total = mine.iloc[0], float(mine["device_ms"].sum())
        step, eager = number(r.get("compiled_step_ms")), number(r.get("eager_step_ms"))
        slower = step is not None and eager is not None and step > eager
        text = (f"{r['label']}: its compiled step is slower than eager, {ms_text(step)} against {ms_text(eager)} "
                f"({eager / step:.2f}x); {slower_causes(r)}. " if slower and step and eager else f"{r['label']}: ")
        text += (f"{float(top['share_pct']):.0f}% of its {dev} time a step ({ms_text(total)}) goes to "
                 f"{category_label(top['category'], dev)}")
        figures = {"category": top["category"], "share_pct": float(top["share_pct"]), "device_ms": total}
        costliest = rows_of(kernels_of, r["job"], step_kernels).sort_values("share_pct", ascending=False)
        if len(costliest):
            k = costliest.iloc[0]
            text += f"; its costliest kernel, {short_name(str(k['kernel']))}, {float(k['share_pct']):.0f}%"
            figures.update(kernel=str(k["kernel"]), kernel_share_pct=float(k["share_pct"]))
        if len(mine) > 1:
            nxt = mine.iloc[1]
            text += f"; then {category_label(nxt['category'], dev)} {float(nxt['share_pct']):.0f}%"
        text += "."
        if step is not None and eager is not None and step > 0 and not slower:
            text += f" The compiled step takes {ms_text(step)} against {ms_text(eager)} eager ({eager / step:.2f}x)"
            busy = number(r.get("busy_pct"))
            text += f"; the GPU is busy {busy:.0f}% of it." if dev == "GPU" and busy is not None else "."
        if step is not None and eager is not None:
            figures.update(compiled_step_ms=step, eager_step_ms=eager, slower_than_eager=slower)
        out.append(Finding("where_time_goes", r["label"], text, f"#kernels-{r['job']}", figures))
    return out


SMALL_BATCH = 4  # a batch this small or smaller: per-step overheads weigh more than the kernels' work


def slower_causes(row) -> str:
    """What a job's record can tell about why its compiled step is slower than eager: a
    busy host, unsteady timings, graph breaks, a small batch, a CPU; or that it names none."""
    causes = []
    busy = number(row.get("host_busy_cores"))
    if busy is not None and busy >= 1:
        causes.append(f"other work kept {busy:.1f} cores of the host busy while it measured")
    iqr = number(row.get("timing_iqr_pct"))
    if iqr is not None and iqr >= 15:
        causes.append(f"its timed rounds varied by {iqr:.0f}% (interquartile range)")
    graphs = number(row.get("compiled_graphs"))
    if graphs is not None and graphs > 1:
        causes.append(f"it compiled into {graphs:.0f} graphs (graph breaks: time between them runs eager)")
    batch = number(row.get("batch_size"))
    if batch is not None and batch <= SMALL_BATCH:
        causes.append(f"a batch of {batch:.0f}, where per-step overheads outweigh the kernels' work")
    if not on_gpu(row):
        causes.append("on a CPU, Inductor's C++ kernels against ATen's own")
    return ("what the record shows: " + "; ".join(causes)) if causes else "the record shows no cause (an idle host, steady timings, one graph)"


def launch_bound(jobs: pd.DataFrame) -> list[Finding]:
    out = []
    twins = {job: p.b for p in one_key_pairs(jobs) if p.key == "cudagraphs" for job in p.a_jobs}
    for _, r in ok_jobs(jobs).iterrows():
        busy, launches, device = number(r.get("busy_pct")), number(r.get("kernel_launches")), number(r.get("device_ms"))
        step = number(r.get("compiled_step_ms"))
        if not on_gpu(r) or busy is None or launches is None or device is None or step is None or not launches:
            continue
        mean_us = device * 1000 / launches
        if not (busy < LAUNCH_BUSY_PCT and launches >= LAUNCH_MIN_KERNELS and mean_us < LAUNCH_MEAN_US):
            continue
        text = (f"{r['label']} is launch-bound: the GPU is busy {busy:.0f}% of its {ms_text(step)} step, running "
                f"{launches:.0f} kernels a step of {mean_us:.1f} µs on average.")
        figures = {"busy_pct": busy, "step_ms": step, "launches": launches, "mean_kernel_us": mean_us}
        twin = twins.get(r["job"])
        if twin is not None and not r["cudagraphs"] and number(twin.get("busy_pct")) is not None:
            t_step = float(twin["compiled_step_ms"])
            text += (f" With CUDA graphs ({twin['label']}) the GPU is busy {float(twin['busy_pct']):.0f}% and the "
                     f"step takes {ms_text(t_step)}: {step / t_step:.1f}x faster.")
            figures.update(graphs_busy_pct=float(twin["busy_pct"]), graphs_step_ms=t_step)
        elif not r["cudagraphs"]:
            text += " The sweep has no CUDA-graphs variant of it (cudagraphs=on removes the launch gaps)."
        out.append(Finding("launch_bound", r["label"], text, f"#job-{r['job']}", figures))
    return out


def across_runs(jobs: pd.DataFrame) -> list[Finding]:
    ok = ok_jobs(jobs)
    out: list[Finding] = []
    if len(ok) < 2:
        return out
    for cat, name in CATEGORIES.items():
        col = f"share_{cat}"
        if col not in ok or ok[col].isna().all():
            continue
        shares = ok.set_index("label")[col].fillna(0.0)
        for (label, share), median in zip(shares.items(), medians_of_others(shares.to_numpy(dtype=float))):
            if abs(share - median) >= ACROSS_MIN_PP:
                out.append(Finding("across_runs", "across jobs",
                                   f"{label} spends {share:.0f}% of its {_dev(ok)} time in {name.split(' (')[0]}, "
                                   f"against {median:.0f}% for the other jobs (their median).", "#fig-shares",
                                   {"job": label, "category": cat, "share_pct": float(share), "others_median_pct": median}))
    out = sorted(out, key=lambda f: -abs(f.figures["share_pct"] - f.figures["others_median_pct"]))
    out = (_grouped_by_category(out, _dev(ok)) if len(ok) > BUSY_LISTED else out)[:ACROSS_TOP]
    busy = ok.dropna(subset=["busy_pct"]).sort_values(["model", "batch_size", "label"])
    if 2 <= len(busy) <= BUSY_LISTED:
        side = ", ".join(f"{r['label']} {r['busy_pct']:.0f}%" for _, r in busy.iterrows())
        out.append(Finding("across_runs", "across jobs", f"{_dev(ok)} busy side by side: {side}.", "#fig-busy",
                           {"busy_pct": dict(zip(busy["label"], busy["busy_pct"]))}))
    elif len(busy) > BUSY_LISTED:  # too many to list: the spread, and the least busy by name
        low = busy.nsmallest(3, "busy_pct")
        out.append(Finding("across_runs", "across jobs", f"{_dev(ok)} busy over {count(len(busy), 'job')}: median "
                           f"{busy['busy_pct'].median():.0f}%, from {busy['busy_pct'].min():.0f}% to "
                           f"{busy['busy_pct'].max():.0f}%; the least busy: " + ", ".join(
                               f"{r['label']} {r['busy_pct']:.0f}%" for _, r in low.iterrows()) + ".", "#fig-busy",
                           {"busy_pct": dict(zip(busy["label"], busy["busy_pct"]))}))
    return out


def _grouped_by_category(found: list[Finding], dev: str) -> list[Finding]:
    """A large sweep's across-jobs findings, one a category: the jobs that stand out in
    it named together (the first three, then how many more), in the order of the job that
    stands out most."""
    groups: dict[str, list[Finding]] = {}
    for f in found:
        groups.setdefault(f.figures["category"], []).append(f)
    out = []
    for cat, fs in groups.items():
        if len(fs) == 1:
            out.append(fs[0])
            continue
        shares = [f.figures["share_pct"] for f in fs]
        names = ", ".join(f.figures["job"] for f in fs[:3]) + (f" and {len(fs) - 3} more" if len(fs) > 3 else "")
        median = fs[0].figures["others_median_pct"]
        out.append(Finding("across_runs", "across jobs",
                           f"{len(fs)} jobs spend {min(shares):.0f}-{max(shares):.0f}% of their {dev} time in "
                           f"{CATEGORIES[cat].split(' (')[0]}, against {median:.0f}% for the other jobs (their "
                           f"median): {names}.", "#fig-shares",
                           {"jobs": [f.figures["job"] for f in fs], "category": cat, "share_pct": shares[0],
                            "others_median_pct": median}))
    return out


def medians_of_others(values: np.ndarray) -> list[float]:
    """For each value, the median of all the others (sorted once, not once a value)."""
    order = np.sort(values)
    out = []
    for v in values:
        i = int(np.searchsorted(order, v))  # one copy of v taken out
        out.append(float(np.median(np.delete(order, i))) if len(order) > 1 else float("nan"))
    return out


def _dev(ok: pd.DataFrame) -> str:
    gpus = ok["gpu"].notna() if "gpu" in ok else pd.Series(dtype=bool)
    return "GPU" if len(gpus) and gpus.all() else ("CPU" if len(gpus) and not gpus.any() else "device")


def module_view(jobs: pd.DataFrame, cats: pd.DataFrame) -> tuple[list[Finding], pd.DataFrame]:
    """Each job's modules' own category shares (their calls once each: the step's forward
    and backward, or its inference) against its step's: the largest difference, and a
    finding where it passes MODULE_VIEW_MAX_PP."""
    rows, out = [], []
    cats_of = by_job(cats)
    for _, r in ok_jobs(jobs).iterrows():
        mine = rows_of(cats_of, r["job"], cats)
        step, modules = mine[mine["scope"] == "step"], mine[mine["scope"] != "step"]
        if step.empty or modules.empty:
            continue
        m = modules.groupby("category")["device_ms"].sum()
        m = 100 * m / m.sum() if m.sum() else m
        s = step.set_index("category")["share_pct"]
        diff = (m.reindex(m.index.union(s.index), fill_value=0) - s.reindex(m.index.union(s.index), fill_value=0))
        cat = diff.abs().idxmax()
        rows.append({"job": r["job"], "label": r["label"], "category": cat, "module_view_pct": float(m.get(cat, 0.0)),
                     "step_pct": float(s.get(cat, 0.0)), "difference_pp": float(diff[cat])})
        if abs(diff[cat]) > MODULE_VIEW_MAX_PP:
            out.append(Finding("module_view", r["label"],
                               f"{r['label']}: its modules timed alone (the view `python <module>.py -p` gives) put "
                               f"{float(m.get(cat, 0.0)):.1f}% of the time in {CATEGORIES.get(cat, cat).split(' (')[0]}, "
                               f"its real step {float(s.get(cat, 0.0)):.1f}% ({float(diff[cat]):+.1f} points). The "
                               "step counts what runs outside the compiled modules and times them as the step runs "
                               "them: read the step's shares for this job.", "#module-view", rows[-1]))
    return out, pd.DataFrame(rows, columns=["job", "label", "category", "module_view_pct", "step_pct", "difference_pp"])


def fold_twins(found: list[Finding], jobs: pd.DataFrame) -> list[Finding]:
    """A job's CUDA-graphs twin finds the same kernels (graphs change launches, not
    kernels): its layout and memory findings are folded into the other job's, a clause
    saying the twin's figure, rather than said twice."""
    # repeats (seeds) of the two configurations folded in order: the first with the first
    twin_of = {rb["label"]: ra["label"] for p in one_key_pairs(jobs) if p.key == "cudagraphs"
               for ra, rb in zip(p.a_rows, p.b_rows)}
    by = {(f.rule, f.scope): f for f in found}
    out = []
    for f in found:
        base = by.get((f.rule, twin_of.get(f.scope, "")))
        if f.rule in ("layout_conversions", "memory_bound") and base is not None:
            if f.rule == "layout_conversions":
                base.text += f" The same in {f.scope}: {f.figures['share_pct']:.1f}%."
            else:
                base.text += f" The same kernels lead {f.scope}."
            continue
        out.append(f)
    return out


def accuracy_failed(jobs: pd.DataFrame) -> list[Finding]:
    """Every finished job whose compiled step failed the check against eager: first, since
    its figures are those of another computation."""
    out: list[Finding] = []
    if "accuracy" not in jobs:
        return out
    for _, r in ok_jobs(jobs)[ok_jobs(jobs)["accuracy"] == "failed"].iterrows():
        out.append(Finding("accuracy", r["label"], f"{r['label']}: its compiled step does not compute what eager "
                           f"does: {r['accuracy_failed']} outside PyTorch's --accuracy tolerance. Its times are "
                           "those of another computation: read them with that in mind.", f"#job-{r['job']}",
                           {"failed": r["accuracy_failed"]}))
    return out


def all_findings(jobs: pd.DataFrame, cats: pd.DataFrame, kernels: pd.DataFrame, bench: pd.DataFrame,
                 model_code: tuple[list[Finding], list[Finding]] = ([], []),
                 to_win: list[Finding] | None = None, decisions: list[Finding] | None = None
                 ) -> tuple[list[Finding], pd.DataFrame]:
    """Every finding the sweep's data supports: what is left to win over the sweep, where
    in the model each job's time goes and in which kinds of kernel first, then the other
    per-job rules, then across jobs; and the module-view table (module_view). `model_code`:
    the findings of the time by model code (sweeper/reporting/model_code.py), per job and
    per pair of jobs; `to_win`: the roofline's (sweeper/reporting/roofline.py); `decisions`:
    max-autotune's decisions against their noise (sweeper/reporting/autotune_decisions.py)."""
    views, table = module_view(jobs, cats)
    code, pairs = model_code
    found = (accuracy_failed(jobs) + (to_win or []) + code + where_time_goes(jobs, cats, kernels) + launch_bound(jobs)
             + layout_conversions(jobs, kernels) + autotune(jobs, kernels) + (decisions or []) + pairs
             + memory_bound(bench) + views + across_runs(jobs))
    return fold_twins(found, jobs), table
