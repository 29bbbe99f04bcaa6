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

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sweeper.analysis.categories import (CATEGORIES, LIBRARY, TRITON_PERSISTENT, TRITON_POINTWISE, TRITON_REDUCTION,
                                         TRITON_TEMPLATE, category_label)
from sweeper.reporting.pairs import one_key_pairs

LAUNCH_BUSY_PCT = 50.0
LAUNCH_MIN_KERNELS = 200
LAUNCH_MEAN_US = 20.0
LAYOUT_MIN_SHARE_PCT = 5.0
MEMORY_TOP = 3  # the costliest benchmarked kernels looked at, per job
MEMORY_SAID = 2  # of those, the ones a finding names
MEMORY_MAX_PEAK_PCT = 50.0
MEMORY_MIN_TRITON_SHARE_PCT = 1.0
MEMORY_CATEGORIES = (TRITON_POINTWISE, TRITON_REDUCTION, TRITON_PERSISTENT)  # a template's roofline is its arithmetic too
MEMORY_MIN_MB = 1.0  # a kernel moving less a launch is latency-bound: its launch, not its bytes, is its cost
ACROSS_MIN_PP = 15.0
ACROSS_TOP = 3  # the categories that stand out most
BUSY_LISTED = 12  # jobs whose busy figures a finding lists side by side; more: their spread
MODULE_VIEW_MAX_PP = 1.5

# Layout transforms by kernel name: cuDNN's own NCHW <-> NHWC conversions, ATen's strided
# copy (a tensor copied into another memory layout: .contiguous(), channels_last), and
# Inductor's clone kernels (a pure relayout: triton_poi_fused_clone_3).
LAYOUT_KERNELS = (
    ("cuDNN's NCHW to NHWC conversion", re.compile(r"nchwToNhwc|nchw2nhwc", re.I)),
    ("cuDNN's NHWC to NCHW conversion", re.compile(r"nhwcToNchw|nhwc2nchw", re.I)),
    ("ATen's strided copy", re.compile(r"direct_copy_kernel_cuda")),
    ("Inductor's clone kernel", re.compile(r"^triton_poi_fused_clone_\d+$")),
)


@dataclass
class Finding:
    rule: str
    scope: str  # a job's label, or "across jobs"
    text: str
    link: str  # the anchor of the row or figure that shows it: "#job-0", "#fig-shares"
    figures: dict = field(default_factory=dict)  # the figures the sentence quotes


def _short(name: str, width: int = 64) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _ms(x: float) -> str:
    return f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms"


def _ok(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs[jobs["status"] == "ok"]


def _gpu(row) -> bool:
    return isinstance(row.get("gpu"), str) and bool(row.get("gpu"))


def _num(x) -> float | None:
    return None if x is None or pd.isna(x) else float(x)


def by_job(table: pd.DataFrame) -> dict:
    """job -> its rows (one grouping, then a look-up a job: a sweep of 1,000 jobs would
    otherwise filter its whole kernels table 1,000 times)."""
    return {j: g for j, g in table.groupby("job", sort=False)}


def _rows_of(groups: dict, job, like: pd.DataFrame) -> pd.DataFrame:
    return groups.get(job, like.iloc[0:0])


def where_time_goes(jobs: pd.DataFrame, cats: pd.DataFrame, kernels: pd.DataFrame) -> list[Finding]:
    out = []
    step_cats, step_kernels = cats[cats["scope"] == "step"], kernels[kernels["scope"] == "step"]
    cats_of, kernels_of = by_job(step_cats), by_job(step_kernels)
    for _, r in _ok(jobs).iterrows():
        mine = _rows_of(cats_of, r["job"], step_cats).sort_values("share_pct", ascending=False)
        mine = mine[mine["share_pct"] > 0]
        if mine.empty:
            continue
        dev = "GPU" if _gpu(r) else "CPU"
        top, total = mine.iloc[0], float(mine["device_ms"].sum())
        step, eager = _num(r.get("compiled_step_ms")), _num(r.get("eager_step_ms"))
        slower = step is not None and eager is not None and step > eager
        text = (f"{r['label']}: its compiled step is slower than eager, {_ms(step)} against {_ms(eager)} "
                f"({eager / step:.2f}x); {slower_causes(r)}. " if slower and step and eager else f"{r['label']}: ")
        text += (f"{float(top['share_pct']):.0f}% of its {dev} time a step ({_ms(total)}) goes to "
                 f"{category_label(top['category'], dev)}")
        figures = {"category": top["category"], "share_pct": float(top["share_pct"]), "device_ms": total}
        costliest = _rows_of(kernels_of, r["job"], step_kernels).sort_values("share_pct", ascending=False)
        if len(costliest):
            k = costliest.iloc[0]
            text += f"; its costliest kernel, {_short(str(k['kernel']))}, {float(k['share_pct']):.0f}%"
            figures.update(kernel=str(k["kernel"]), kernel_share_pct=float(k["share_pct"]))
        if len(mine) > 1:
            nxt = mine.iloc[1]
            text += f"; then {category_label(nxt['category'], dev)} {float(nxt['share_pct']):.0f}%"
        text += "."
        if step is not None and eager is not None and step > 0 and not slower:
            text += f" The compiled step takes {_ms(step)} against {_ms(eager)} eager ({eager / step:.2f}x)"
            busy = _num(r.get("busy_pct"))
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
    busy = _num(row.get("host_busy_cores"))
    if busy is not None and busy >= 1:
        causes.append(f"other work kept {busy:.1f} cores of the host busy while it measured")
    iqr = _num(row.get("timing_iqr_pct"))
    if iqr is not None and iqr >= 15:
        causes.append(f"its timed rounds varied by {iqr:.0f}% (interquartile range)")
    graphs = _num(row.get("compiled_graphs"))
    if graphs is not None and graphs > 1:
        causes.append(f"it compiled into {graphs:.0f} graphs (graph breaks: time between them runs eager)")
    batch = _num(row.get("batch_size"))
    if batch is not None and batch <= SMALL_BATCH:
        causes.append(f"a batch of {batch:.0f}, where per-step overheads outweigh the kernels' work")
    if not _gpu(row):
        causes.append("on a CPU, Inductor's C++ kernels against ATen's own")
    return ("what the record shows: " + "; ".join(causes)) if causes else "the record shows no cause (an idle host, steady timings, one graph)"


def launch_bound(jobs: pd.DataFrame) -> list[Finding]:
    out = []
    twins = {p.a["job"]: p.b for p in one_key_pairs(jobs) if p.key == "cudagraphs"}
    for _, r in _ok(jobs).iterrows():
        busy, launches, device = _num(r.get("busy_pct")), _num(r.get("kernel_launches")), _num(r.get("device_ms"))
        step = _num(r.get("compiled_step_ms"))
        if not _gpu(r) or busy is None or launches is None or device is None or step is None or not launches:
            continue
        mean_us = device * 1000 / launches
        if not (busy < LAUNCH_BUSY_PCT and launches >= LAUNCH_MIN_KERNELS and mean_us < LAUNCH_MEAN_US):
            continue
        text = (f"{r['label']} is launch-bound: the GPU is busy {busy:.0f}% of its {_ms(step)} step, running "
                f"{launches:.0f} kernels a step of {mean_us:.1f} µs on average.")
        figures = {"busy_pct": busy, "step_ms": step, "launches": launches, "mean_kernel_us": mean_us}
        twin = twins.get(r["job"])
        if twin is not None and not r["cudagraphs"] and _num(twin.get("busy_pct")) is not None:
            t_step = float(twin["compiled_step_ms"])
            text += (f" With CUDA graphs ({twin['label']}) the GPU is busy {float(twin['busy_pct']):.0f}% and the "
                     f"step takes {_ms(t_step)}: {step / t_step:.1f}x faster.")
            figures.update(graphs_busy_pct=float(twin["busy_pct"]), graphs_step_ms=t_step)
        elif not r["cudagraphs"]:
            text += " The sweep has no CUDA-graphs variant of it (cudagraphs=on removes the launch gaps)."
        out.append(Finding("launch_bound", r["label"], text, f"#job-{r['job']}", figures))
    return out


def layout_conversions(jobs: pd.DataFrame, kernels: pd.DataFrame) -> list[Finding]:
    out = []
    step = kernels[kernels["scope"] == "step"]
    step = step[step["job"].isin(_ok(jobs)["job"])]
    names = step["kernel"].astype(str)
    step = step[names.str.contains("|".join(p.pattern for _, p in LAYOUT_KERNELS), case=False)
                | names.str.contains("nhwc", case=False)]  # the only kernels this rule reads
    kernels_of = by_job(step)
    for _, r in _ok(jobs).iterrows():
        if not _gpu(r):
            continue
        mine = _rows_of(kernels_of, r["job"], step)
        parts = []
        for what, pattern in LAYOUT_KERNELS:
            hit = mine[mine["kernel"].astype(str).str.contains(pattern)]
            if len(hit):
                parts.append((what, float(hit["share_pct"].sum()), float(hit["count"].sum())))
        total = sum(p[1] for p in parts)
        if total < LAYOUT_MIN_SHARE_PCT:
            continue
        parts.sort(key=lambda p: -p[1])
        listed = ", ".join(f"{what} {share:.1f}% ({count:.0f} launches a step)" for what, share, count in parts)
        text = f"{total:.1f}% of {r['label']}'s GPU time goes to layout conversions: {listed}."
        nhwc = mine[mine["category"].eq(LIBRARY) & mine["kernel"].astype(str).str.contains("nhwc", case=False)
                    & ~mine["kernel"].astype(str).str.contains(LAYOUT_KERNELS[0][1])
                    & ~mine["kernel"].astype(str).str.contains(LAYOUT_KERNELS[1][1])]
        if any(p[0].startswith("cuDNN") for p in parts) and len(nhwc):
            text += (f" cuDNN converts around its convolutions: {nhwc['count'].sum():.0f} of its kernel launches a "
                     "step work in NHWC (their names say nhwc) on a model laid out in NCHW.")
        out.append(Finding("layout_conversions", r["label"], text, f"#kernels-{r['job']}",
                           {"share_pct": total, **{what: share for what, share, _ in parts}}))
    return out


def _op_kind(name: str) -> str | None:
    """A template's or library kernel's op kind by its name: convolution or matmul."""
    n = name.lower()
    if n.startswith("triton_tem"):
        return "convolution" if "convolution" in n else ("matmul" if re.search(r"mm|addmm|bmm|linear", n) else None)
    if re.search(r"fprop|dgrad|wgrad|conv", n):
        return "convolution"
    if re.search(r"gemm|nvjet|cublas", n):
        return "matmul"
    return None


def autotune(jobs: pd.DataFrame, kernels: pd.DataFrame) -> list[Finding]:
    out = []
    step = kernels[kernels["scope"] == "step"]
    kernels_of = by_job(step)
    for p in one_key_pairs(jobs):
        if p.key != "autotune":
            continue
        off, on = p.a, p.b
        s_off = _num(off.get("steady_step_ms")) or _num(off.get("compiled_step_ms"))
        s_on = _num(on.get("steady_step_ms")) or _num(on.get("compiled_step_ms"))
        if not s_off or not s_on:
            continue
        lib, triton = _num(off.get("share_library_mm_conv")), sum(
            _num(off.get(f"share_{c}")) or 0.0 for c in CATEGORIES if c.startswith("triton"))
        text = (f"max-autotune on {off['label']}: the step goes from {_ms(s_off)} to {_ms(s_on)} "
                f"({s_off / s_on:.2f}x).")
        if lib is not None:
            text += (f" Without it, libraries (cuDNN, cuBLAS) hold {lib:.0f}% of the GPU time and Triton "
                     f"{triton:.0f}%;")
        mine = _rows_of(kernels_of, on["job"], step)
        kinds: dict[str, list[float]] = {}
        for name, category, count in zip(mine["kernel"], mine["category"], mine["count"]):
            kind = _op_kind(str(name))
            if kind:
                t = kinds.setdefault(kind, [0.0, 0.0])
                t[0 if category == TRITON_TEMPLATE else 1] += float(count)
        won = " and ".join(f"{t:.0f} of {t + lib_:.0f} {kind} launches" for kind, (t, lib_) in sorted(kinds.items())
                           if t + lib_)
        template = _num(on.get(f"share_{TRITON_TEMPLATE}"))
        if won:
            text += (f" with it, Triton templates run {won} a step"
                     + (f", {template:.0f}% of its GPU time." if template is not None else "."))
        figures = {"speedup": s_off / s_on, "step_off_ms": s_off, "step_on_ms": s_on, "template_share_pct": template}
        c_off, c_on = _num(off.get("compile_s")), _num(on.get("compile_s"))
        cold = str(on.get("compile_state") or "cold") == "cold" and str(off.get("compile_state") or "cold") == "cold"
        if c_off is not None and c_on is not None and cold:
            extra, saved = c_on - c_off, s_off - s_on
            if saved > 0 and extra > 0:
                text += (f" Its compile took {extra:.0f} s longer: {extra / saved:.0f} s for each millisecond saved a "
                         f"step, paid back after {extra * 1000 / saved:,.0f} steps.")
                figures.update(extra_compile_s=extra, s_per_ms_saved=extra / saved, payback_steps=extra * 1000 / saved)
            elif saved <= 0:
                text += f" The step got slower, so its {max(extra, 0):.0f} s of extra compile never pays back."
        elif c_on is not None and not cold:
            text += " (Its compile started from the stores, so its seconds are not a cold compile's.)"
        out.append(Finding("autotune", off["label"], text, "#fig-autotune", figures))
    return out


def memory_bound(bench: pd.DataFrame) -> list[Finding]:
    out: list[Finding] = []
    if bench.empty:
        return out
    rows = bench.dropna(subset=["pct_of_peak_bandwidth", "step_ms"])
    for job, group in rows.groupby("job", sort=True):
        top = group[group["category"].isin(MEMORY_CATEGORIES)].sort_values("step_ms", ascending=False).head(MEMORY_TOP)
        far = top[(top["pct_of_peak_bandwidth"] < MEMORY_MAX_PEAK_PCT)
                  & (top["share_of_triton_pct"] >= MEMORY_MIN_TRITON_SHARE_PCT)
                  & (top["num_gb"].fillna(0) * 1000 >= MEMORY_MIN_MB)]
        if far.empty:
            continue
        parts = []
        for _, k in far.head(MEMORY_SAID).iterrows():
            head = _num(k.get("headroom_pct"))
            parts.append(f"{_short(str(k['kernel']))} ({float(k['share_of_triton_pct']):.1f}% of its Triton time, "
                         f"{float(k['num_gb']) * 1000:.0f} MB a launch) reaches "
                         f"{float(k['pct_of_peak_bandwidth']):.0f}% of the measured peak bandwidth"
                         + (f"; another of its configs runs {head:.1f}% faster" if head is not None and head >= 1 else ""))
        heads = [h for h in far["headroom_pct"].dropna()] if "headroom_pct" in far else []
        verdict = ""
        if heads and max(heads) < 1:
            verdict = (" No other config of theirs ran 1% faster in the microbenchmarks: their code, not their "
                       "configs, holds them back.")
        label = far["label"].iloc[0]
        out.append(Finding("memory_bound", label, f"{label}'s costliest Triton kernels are far from the bandwidth "
                           f"roofline: " + "; ".join(parts) + "." + verdict, "#fig-roofline",
                           {"kernels": list(far["kernel"]), "pct_of_peak": list(far["pct_of_peak_bandwidth"])}))
    return out


def across_runs(jobs: pd.DataFrame) -> list[Finding]:
    ok = _ok(jobs)
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
        out.append(Finding("across_runs", "across jobs", f"{_dev(ok)} busy over {len(busy)} jobs: median "
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
    for _, r in _ok(jobs).iterrows():
        mine = _rows_of(cats_of, r["job"], cats)
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
    twin_of = {p.b["label"]: p.a["label"] for p in one_key_pairs(jobs) if p.key == "cudagraphs"}
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
    for _, r in _ok(jobs)[_ok(jobs)["accuracy"] == "failed"].iterrows():
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
