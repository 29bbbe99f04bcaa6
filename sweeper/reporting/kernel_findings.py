"""The report's findings about kernels (pure: tables in, findings out; the rules are listed in
sweeper/reporting/findings.py): layout conversions, what max-autotune's templates took over
and what their compile cost, and Triton kernels far from the bandwidth roofline."""

from __future__ import annotations

import re

import pandas as pd

from sweeper.analysis.categories import (CATEGORIES, LIBRARY, TRITON_PERSISTENT, TRITON_POINTWISE, TRITON_REDUCTION,
                                         TRITON_TEMPLATE)
from sweeper.analysis.autotune_verdict import FASTER, SLOWER, sentence, twin_verdict
from sweeper.analysis.repeats import cold
from sweeper.reporting.finding import Finding, by_job, ms_text, number, ok_jobs, on_gpu, rows_of, short_name
from sweeper.reporting.pairs import one_key_pairs


LAYOUT_MIN_SHARE_PCT = 5.0


MEMORY_TOP = 3  # the costliest benchmarked kernels looked at, per job


MEMORY_SAID = 2  # of those, the ones a finding names


MEMORY_MAX_PEAK_PCT = 50.0


MEMORY_MIN_TRITON_SHARE_PCT = 1.0


MEMORY_CATEGORIES = (TRITON_POINTWISE, TRITON_REDUCTION, TRITON_PERSISTENT)  # a template's roofline is its arithmetic too


MEMORY_MIN_MB = 1.0  # a kernel moving less a launch is latency-bound: its launch, not its bytes, is its cost


# Layout transforms by kernel name: cuDNN's own NCHW <-> NHWC conversions, ATen's strided
# copy (a tensor copied into another memory layout: .contiguous(), channels_last), and
# Inductor's clone kernels (a pure relayout: triton_poi_fused_clone_3).
LAYOUT_KERNELS = (
    ("cuDNN's NCHW to NHWC conversion", re.compile(r"nchwToNhwc|nchw2nhwc", re.I)),
    ("cuDNN's NHWC to NCHW conversion", re.compile(r"nhwcToNchw|nhwc2nchw", re.I)),
    ("ATen's strided copy", re.compile(r"direct_copy_kernel_cuda")),
    ("Inductor's clone kernel", re.compile(r"^triton_poi_fused_clone_\d+$")),
)


def layout_conversions(jobs: pd.DataFrame, kernels: pd.DataFrame) -> list[Finding]:
    out = []
    step = kernels[kernels["scope"] == "step"]
    step = step[step["job"].isin(ok_jobs(jobs)["job"])]
    names = step["kernel"].astype(str)
    step = step[names.str.contains("|".join(p.pattern for _, p in LAYOUT_KERNELS), case=False)
                | names.str.contains("nhwc", case=False)]  # the only kernels this rule reads
    kernels_of = by_job(step)
    for _, r in ok_jobs(jobs).iterrows():
        if not on_gpu(r):
            continue
        mine = rows_of(kernels_of, r["job"], step)
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
    """One verdict per pair of jobs apart in max-autotune only (sweeper/analysis/
    autotune_verdict.py): the kernels' time a step against its run-to-run noise, the step
    only where something autotune did accounts for it; what the templates took over; the
    payback of the extra compile from the figure the verdict stands on."""
    out = []
    step = kernels[kernels["scope"] == "step"]
    kernels_of = by_job(step)
    for p in one_key_pairs(jobs):
        if p.key != "autotune":
            continue
        off, on = p.twins()  # repeats (seeds) of a side: their median, held against their spread too
        v = twin_verdict(off, on)
        if v is None:
            continue
        text = f"max-autotune on {off['label']}: {sentence(v)}."
        lib, triton = number(off.get("share_library_mm_conv")), sum(
            number(off.get(f"share_{c}")) or 0.0 for c in CATEGORIES if c.startswith("triton"))
        if lib is not None:
            libs, of = ("cuDNN, cuBLAS", "GPU time") if on_gpu(off) else ("oneDNN, MKL", "kernel time")
            text += f" Without it, libraries ({libs}) hold {lib:.0f}% of the {of} and Triton {triton:.0f}%;"
        mine = rows_of(kernels_of, on["job"], step)
        kinds: dict[str, list[float]] = {}
        for name, category, count in zip(mine["kernel"], mine["category"], mine["count"]):
            kind = _op_kind(str(name))
            if kind:
                t = kinds.setdefault(kind, [0.0, 0.0])
                t[0 if category == TRITON_TEMPLATE else 1] += float(count)
        won = " and ".join(f"{t:.0f} of {t + lib_:.0f} {kind} launches" for kind, (t, lib_) in sorted(kinds.items())
                           if t + lib_)
        template = number(on.get(f"share_{TRITON_TEMPLATE}"))
        if won and on_gpu(off):  # a CPU's templates are C++ GEMMs: no Triton template to count
            text += (f" with it, Triton templates run {won} a step"
                     + (f", {template:.0f}% of its GPU time." if template is not None else "."))
        figures = {"speedup": v.speedup, "verdict": v.step_word, "gpu_verdict": v.gpu.word if v.gpu else None,
                   "gpu_change_pct": v.gpu.change_pct if v.gpu else None,
                   "step_off_ms": v.step.off if v.step else None, "step_on_ms": v.step.on if v.step else None,
                   "template_share_pct": template, **v.figures}
        c_off, c_on = number(off.get("compile_s")), number(on.get("compile_s"))
        both_cold = cold(on) and cold(off)
        saved = v.saved_ms
        of_what = "a step" if v.step is not None and v.step_word in (FASTER, SLOWER) else "of kernel time a step"
        if c_off is not None and c_on is not None and both_cold:
            extra = c_on - c_off
            if saved is not None and saved > 0 and extra > 0:
                text += (f" Its compile took {extra:.0f} s longer: {extra / saved:.0f} s for each millisecond saved "
                         f"{of_what}, paid back after {extra * 1000 / saved:,.0f} steps.")
                figures.update(extra_compile_s=extra, s_per_ms_saved=extra / saved, payback_steps=extra * 1000 / saved)
            elif saved is not None and saved <= 0:
                text += f" It made the job slower, so its {max(extra, 0):.0f} s of extra compile never pays back."
            elif extra > 0:
                text += f" Its compile took {extra:.0f} s longer for no change that can be told from noise."
        elif c_on is not None and not both_cold:
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
            head = number(k.get("headroom_pct"))
            parts.append(f"{short_name(str(k['kernel']))} ({float(k['share_of_triton_pct']):.1f}% of its Triton time, "
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
