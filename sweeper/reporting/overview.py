"""The sweep's own answers, before any job's (pure: tables in, an Overview out): where
the sweep's device time goes as a whole (by kernel category, model family and variant),
which few jobs and kernels hold most of it, how much of it the microbenchmarks say could
still be won, and what the per-job findings add up to. A nightly of hundreds of jobs is
read from here; each job's own findings stay in its section of the page.

Every ranking is by device time a step, one step of each job: the sweep's device time is
the sum over its finished jobs of their profiled step's summed kernel time (device_ms).
"Left to win" is only where it is known: a launch's time above its bound at the device's
measured roofs (sweeper/analysis/roofline.py); for records without a roofline, a benchmarked
Triton kernel's time above what it would take at the job's measured peak bandwidth, per
step (step_ms x (1 - achieved/peak)), kernels over the peak counting nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd

from sweeper.analysis.categories import CATEGORIES, category_label
from sweeper.reporting.finding import Finding

# Up to this many jobs the page lists every finding on its first screen, as for the
# 4-job command; above it the sweep's overview comes first and each job's findings go to
# its own section.
SMALL_SWEEP_JOBS = 12
TOP_JOBS = 10  # rows of the costliest-jobs table
TOP_KERNELS = 10  # rows of the costliest-kernels table
TOP_GROUPS = 6  # families or variants named in a sentence
NAMED_PER_RULE = 3  # jobs a per-rule summary names


def family(model: str) -> str:
    """A timm model's family: the letters its name starts with (densenet121 -> densenet,
    mixnet_l -> mixnet, vit_base_patch16_224 -> vit, resnet50d -> resnet)."""
    m = re.match(r"[a-z]+", str(model).lower())
    return m.group(0) if m else str(model)


def variant(row) -> str:
    """The compile variant of a jobs-table row, without model and batch: "train fp16
    autotune" (the job label's words for it)."""
    parts = ["train" if row.get("mode") == "training" else "infer"]
    if row.get("amp") is True or row.get("amp") == 1:
        parts.append({"float16": "fp16", "bfloat16": "bf16"}.get(str(row.get("amp_dtype")), "amp"))
    for key in ("cudagraphs", "autotune"):
        if row.get(key) is True or row.get(key) == 1:
            parts.append(key)
    python = row.get("python")
    if isinstance(python, str) and python:
        parts.append(f"python={python}")
    return " ".join(parts)


@dataclass
class Overview:
    device: str  # GPU, CPU or device
    jobs_ok: int
    device_ms: float  # the sweep's device time: one step of each finished job
    by_category: pd.DataFrame  # category, name, device_ms, share_pct
    by_family: pd.DataFrame  # family, jobs, device_ms, share_pct, top_category, busy_median, speedup_median
    by_variant: pd.DataFrame  # variant, jobs, device_ms, share_pct, busy_median, speedup_median
    top_jobs: pd.DataFrame  # job, label, device_ms, share_pct, busy_pct, speedup, left_ms
    top_kernels: pd.DataFrame  # job, label, kernel, category, device_ms, share_pct, pct_of_peak, left_ms
    left_ms: float | None  # time left to win a step over the sweep, where known (None: no bound known)
    roofline: bool = False  # left_ms from the roofline (both roofs), not the microbenchmarks' bandwidth
    findings: list[Finding] = field(default_factory=list)  # the sweep-level sentences, first screen


def _median(s: pd.Series) -> float | None:
    s = s.dropna()
    return float(s.median()) if len(s) else None


def left_to_win(bench: pd.DataFrame, recoverable: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per kernel (job, kernel): ms a step above its bound. From the roofline's launch sites
    (both roofs, every kind of kernel with known work) where the records have them, else
    from the benchmarked Triton kernels against the bandwidth alone."""
    if recoverable is not None and recoverable["recoverable_ms"].notna().any():
        r = recoverable.dropna(subset=["recoverable_ms"])
        g = r.groupby(["job", "kernel"], as_index=False).agg(left_ms=("recoverable_ms", "sum"),
                                                            bound=("bound_ms", "sum"), ms=("device_ms", "sum"))
        return pd.DataFrame({"job": g["job"], "kernel": g["kernel"], "pct_of_peak": 100 * g["bound"] / g["ms"],
                             "left_ms": g["left_ms"]})
    if bench.empty:
        return pd.DataFrame(columns=["job", "kernel", "pct_of_peak", "left_ms"])
    b = bench.dropna(subset=["pct_of_peak_bandwidth", "step_ms"])
    left = b["step_ms"] * (1 - b["pct_of_peak_bandwidth"].clip(upper=100) / 100)
    return pd.DataFrame({"job": b["job"], "kernel": b["kernel"], "pct_of_peak": b["pct_of_peak_bandwidth"],
                         "left_ms": left})


def overview(jobs: pd.DataFrame, cats: pd.DataFrame, kernels: pd.DataFrame, bench: pd.DataFrame,
             device: str, recoverable: pd.DataFrame | None = None) -> Overview:
    ok = jobs[(jobs["status"] == "ok") & jobs["device_ms"].notna()].copy()
    ok["family"] = ok["model"].map(family)
    ok["variant"] = [variant(r) for _, r in ok.iterrows()]
    total = float(ok["device_ms"].sum())

    def share(ms) -> float:
        return 100 * float(ms) / total if total else 0.0

    step = cats[(cats["scope"] == "step") & cats["job"].isin(ok["job"])]
    by_cat = step.groupby("category", as_index=False)["device_ms"].sum().sort_values("device_ms", ascending=False)
    by_cat["name"] = [category_label(c, device) for c in by_cat["category"]]
    by_cat["share_pct"] = [share(v) for v in by_cat["device_ms"]]

    top_cat = (step.merge(ok[["job", "family"]], on="job").groupby(["family", "category"])["device_ms"].sum()
               .reset_index().sort_values("device_ms", ascending=False).drop_duplicates("family")
               .set_index("family")["category"])

    def groups(col: str) -> pd.DataFrame:
        g = ok.groupby(col).agg(jobs=("job", "size"), device_ms=("device_ms", "sum"),
                                busy_median=("busy_pct", lambda s: _median(s)),
                                speedup_median=("speedup", lambda s: _median(s))).reset_index()
        g["share_pct"] = [share(v) for v in g["device_ms"]]
        return g.sort_values("device_ms", ascending=False).reset_index(drop=True)

    by_family, by_variant = groups("family"), groups("variant")
    by_family["top_category"] = by_family["family"].map(top_cat)

    left = left_to_win(bench, recoverable)
    roofline = recoverable is not None and recoverable["recoverable_ms"].notna().any()
    left_by_job = (ok.set_index("job")["recoverable_ms"].dropna() if roofline
                   else left.groupby("job")["left_ms"].sum() if len(left) else pd.Series(dtype=float))
    top_jobs = ok.sort_values("device_ms", ascending=False).head(TOP_JOBS)
    top_jobs = pd.DataFrame({"job": top_jobs["job"], "label": top_jobs["label"], "device_ms": top_jobs["device_ms"],
                             "share_pct": [share(v) for v in top_jobs["device_ms"]],
                             "busy_pct": top_jobs["busy_pct"], "speedup": top_jobs["speedup"],
                             "left_ms": top_jobs["job"].map(left_by_job)}).reset_index(drop=True)

    ks = kernels[(kernels["scope"] == "step") & kernels["job"].isin(ok["job"])]
    ks = ks.astype({"device_ms": float}).nlargest(TOP_KERNELS, "device_ms")[["job", "label", "kernel", "category", "device_ms"]]
    ks = ks.merge(left, on=["job", "kernel"], how="left")
    ks["share_pct"] = [share(v) for v in ks["device_ms"]]
    out = Overview(device, len(ok), total, by_cat.reset_index(drop=True), by_family, by_variant, top_jobs,
                   ks.reset_index(drop=True), float(left_by_job.sum()) if len(left_by_job) else None, roofline=roofline)
    out.findings = sweep_findings(out)
    return out


def _ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 100 else (f"{x:.1f} ms" if x >= 10 else f"{x:.2f} ms")


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def sweep_findings(o: Overview) -> list[Finding]:
    """The sentences of the first screen: the sweep's time by category, by model family and
    by variant; the share the costliest jobs and kernels hold; what is left to win."""
    if not o.jobs_ok or not o.device_ms:
        return []
    dev = o.device
    cats = ", ".join(f"{r['share_pct']:.0f}% {r['name'].split(' (')[0]}" for _, r in o.by_category.head(4).iterrows())
    out = [Finding("sweep_time", "sweep", f"Over its {o.jobs_ok} finished jobs, one step each, the sweep spends "
                   f"{_ms(o.device_ms)} of {dev} time: {cats}.", "#fig-shares",
                   {"device_ms": o.device_ms, "shares": dict(zip(o.by_category["category"], o.by_category["share_pct"]))})]
    fam = o.by_family.head(TOP_GROUPS)
    more = len(o.by_family) - len(fam)
    out.append(Finding("sweep_families", "sweep", "By model family: " + "; ".join(
        f"{r['family']} {r['share_pct']:.0f}% ({r['jobs']} jobs, mostly "
        f"{CATEGORIES.get(r['top_category'], r['top_category']).split(' (')[0]}"
        + (f", busy {r['busy_median']:.0f}% at the median" if r["busy_median"] is not None and pd.notna(r["busy_median"])
           and dev == "GPU" else "") + ")" for _, r in fam.iterrows())
        + (f"; and {more} more families" if more > 0 else "") + ".", "#overview-families",
        {"families": dict(zip(o.by_family["family"], o.by_family["share_pct"]))}))
    if len(o.by_variant) > 1:
        var = o.by_variant.head(TOP_GROUPS)
        out.append(Finding("sweep_variants", "sweep", "By variant: " + "; ".join(
            f"{r['variant']} {r['share_pct']:.0f}% ({r['jobs']} jobs"
            + (f", {r['speedup_median']:.2f}x eager at the median" if r["speedup_median"] is not None
               and pd.notna(r["speedup_median"]) else "") + ")" for _, r in var.iterrows())
            + (f"; and {len(o.by_variant) - len(var)} more" if len(o.by_variant) > len(var) else "") + ".",
            "#overview-variants", {"variants": dict(zip(o.by_variant["variant"], o.by_variant["share_pct"]))}))
    top = o.top_jobs
    if len(top):
        out.append(Finding("sweep_top_jobs", "sweep", f"The {len(top)} costliest jobs hold "
                           f"{top['share_pct'].sum():.0f}% of it: " + ", ".join(
                               f"{r['label']} {_ms(r['device_ms'])}" for _, r in top.head(3).iterrows())
                           + (", ..." if len(top) > 3 else "") + ".", "#overview-jobs",
                           {"share_pct": float(top["share_pct"].sum())}))
    k = o.top_kernels
    if len(k):
        lib = k["category"].value_counts()
        most = lib.index[0]
        out.append(Finding("sweep_top_kernels", "sweep", f"The {len(k)} costliest kernels hold "
                           f"{k['share_pct'].sum():.1f}% of it, {int(lib.iloc[0])} of them "
                           f"{category_label(most, dev).split(' (')[0]}; the first, "
                           f"{_short(str(k['kernel'].iloc[0]))} in {k['label'].iloc[0]}, "
                           f"{_ms(float(k['device_ms'].iloc[0]))} a step.", "#overview-kernels",
                           {"share_pct": float(k["share_pct"].sum())}))
    if o.left_ms is not None and o.left_ms > 0 and not o.roofline:  # with the roofline: its finding (most_to_win)
        known = k.dropna(subset=["left_ms"]) if len(k) else k
        out.append(Finding("sweep_left_to_win", "sweep", f"The benchmarked Triton kernels could win back "
                           f"{_ms(o.left_ms)} a step over the sweep ({100 * o.left_ms / o.device_ms:.1f}% of its "
                           f"{dev} time) if each reached the measured peak bandwidth"
                           + (f"; {len(known)} of the costliest kernels above are among them" if len(known) else "")
                           + " (library and template kernels have no bound yet).", "#overview-kernels",
                           {"left_ms": o.left_ms}))
    return out


# How each per-job rule is summarised on the first screen: the figure that ranks its jobs
# (from Finding.figures) and whether a smaller value is the worse one.
RULE_SUMMARY = {
    "where_time_goes": None,  # one a job: the overview says it for the sweep
    "launch_bound": ("busy_pct", True, "busy {:.0f}%"),
    "layout_conversions": ("share_pct", False, "{:.1f}%"),
    "autotune": ("gpu_change_pct", False, "kernels {:+.1f}%"),
    "memory_bound": (None, False, ""),
    "module_view": ("difference_pp", False, "{:+.1f} points"),
    "autotune_decisions": ("within_noise", False, "{:.0f} choices within noise"),
    "autotune_regret": None,  # site by site, in the job's section: the advice's summary says what to do
    "autotune_advice": ("gain_ms", False, "{:.3f} ms a step to gain"),
}
RULE_WORDS = {"launch_bound": "launch-bound", "layout_conversions": "layout conversions",
              "autotune": "max-autotune pairs", "memory_bound": "kernels far from the bandwidth roofline",
              "module_view": "module view against the step", "autotune_decisions": "max-autotune's decisions",
              "autotune_advice": "what to turn on of max-autotune"}


def rule_summaries(found: list[Finding], job_of: dict[str, int]) -> list[Finding]:
    """One sentence a per-job rule: how many jobs it found something in, and the few
    where it matters most (by the rule's own figure), each linked to its job's section."""
    out = []
    for rule, how in RULE_SUMMARY.items():
        mine = [f for f in found if f.rule == rule and f.scope != "across jobs"]
        if how is None or not mine:
            continue
        col, smaller_worse, fmt = how
        if col is not None:
            ranked = [f for f in mine if isinstance(f.figures.get(col), (int, float))]
            ranked.sort(key=lambda f: f.figures[col] if smaller_worse else -abs(f.figures[col]))
        else:
            ranked = mine
        named = ", ".join(f"{f.scope}" + (f" ({fmt.format(f.figures[col])})" if col else "")
                          for f in ranked[:NAMED_PER_RULE])
        first = job_of.get(ranked[0].scope) if ranked else None
        out.append(Finding(f"summary_{rule}", "sweep", f"{RULE_WORDS[rule].capitalize()}: {len(mine)} of the jobs"
                           + (f"; most: {named}" if named else "") + ".",
                           f"#details-{first}" if first is not None else "#jobs", {"jobs": len(mine)}))
    return out
