"""The figures of a sweep of many jobs (more than figures.MANY_JOBS finished), drawn from
the same tables as figures.py: one bar or legend entry a job stops being readable at a few
dozen jobs, so these group jobs by model family and variant, or rank them and keep the
top ones, and say in their titles what they leave out. Every text is at least
figures.MIN_TEXT_PX high at the width the report shows the figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.analysis.categories import CATEGORIES, category_label
from sweeper.reporting.compile_state import state_of
from sweeper.reporting.figures import (BUSY_AXIS_TOP, COLORS, HEATMAP_ROWS, TOP_ROWS, Figure, _ok, _save,
                                       device_word, module_bars, plt)
from sweeper.reporting.overview import family, variant

ROW_IN = 0.2  # inches a row of a ranked or grouped figure: 22 px at 110 dpi, for 7-point labels
FONT = 7.5  # points: about 11 px at 110 dpi, 9 px or more once scaled to the page


def _groups(ok: pd.DataFrame) -> pd.Series:
    """Each finished job's group: its model family and variant ("densenet · train fp16")."""
    return pd.Series([f"{family(r['model'])} · {variant(r)}" for _, r in ok.iterrows()], index=ok.index)


def shares_heatmap(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> Figure:
    """Category shares of the step as a heatmap: a row a job up to HEATMAP_ROWS jobs, else a
    row a family x variant group (its jobs' device time added up, then shared out), the
    costliest first; beside it each row's device ms a step."""
    dev = device_word(jobs)
    ok = _ok(jobs)
    step = cats[(cats["scope"] == "step") & cats["job"].isin(ok["job"])]
    if step.empty:
        return Figure("shares", f"{dev} time by kernel category", None, "no finished job has a profiled step")
    ms = step.pivot_table(index="job", columns="category", values="device_ms", aggfunc="sum").fillna(0)
    cols = [c for c in CATEGORIES if c in ms.columns and ms[c].sum() > 0]
    ms = ms[cols]
    if len(ms) <= HEATMAP_ROWS:
        rows = ms.rename(index=dict(zip(ok["job"], ok["label"])))
        what = f"a row a job ({len(rows)})"
    else:
        group = _groups(ok.set_index("job").loc[ms.index].reset_index()).values
        counts = pd.Series(group).value_counts()
        rows = ms.groupby(group).sum()
        rows.index = [f"{g} ({counts[g]} jobs)" for g in rows.index]
        what = f"a row a model family and variant ({len(rows)} groups of {len(ms)} jobs)"
    rows = rows.loc[rows.sum(axis=1).sort_values(ascending=False).index]
    cut = len(rows) - HEATMAP_ROWS
    if cut > 0:  # the costliest rows, the rest in one
        rest = rows.iloc[HEATMAP_ROWS - 1:].sum().rename(f"the other {cut + 1} rows")
        rows = pd.concat([rows.iloc[:HEATMAP_ROWS - 1], rest.to_frame().T])
    shares = rows.div(rows.sum(axis=1).replace(0, np.nan), axis=0).fillna(0) * 100
    title = f"{dev} time of the compiled step by kernel category: {what}, costliest first"
    fig = plt.figure(figsize=(13, 2.4 + ROW_IN * len(rows)))
    grid = fig.add_gridspec(1, 2, width_ratios=[4, 1.2])
    ax, bar = fig.add_subplot(grid[0]), fig.add_subplot(grid[1])
    ax.imshow(shares.values, aspect="auto", cmap="Blues", vmin=0, vmax=100)
    for i in range(shares.shape[0]):
        for j in range(shares.shape[1]):
            v = shares.values[i, j]
            if v >= 1:
                ax.text(j, i, f"{v:.0f}", ha="center", va="center", fontsize=FONT,
                        color="white" if v > 60 else "black")
    ax.set_xticks(range(len(cols)), [category_label(c, dev).split(" (")[0] for c in cols], rotation=30, ha="right",
                  fontsize=FONT + 0.5)
    ax.set_yticks(range(len(shares)), list(shares.index), fontsize=FONT)
    ax.set_xlabel(f"share of the row's {dev} time (%)", fontsize=FONT + 1)
    total = rows.sum(axis=1)
    bar.barh(range(len(total)), total.values, color="tab:gray")
    bar.set_ylim(len(total) - 0.5, -0.5)
    bar.set_yticks([])
    bar.set_xlabel(f"{dev} ms a step (all its jobs)", fontsize=FONT + 1)
    bar.tick_params(labelsize=FONT)
    fig.suptitle(title, fontsize=9)
    return Figure("shares", title, _save(fig, out_dir, "shares"), None, tuple(str(i) for i in shares.index))


def busy_by_group(jobs: pd.DataFrame, out_dir: Path) -> Figure:
    """Busy % of every job as a dot in its family x variant row (the row's median marked),
    and beside it the TOP_ROWS least busy jobs by name."""
    dev = device_word(jobs)
    ok = _ok(jobs).dropna(subset=["busy_pct"])
    title = f"{dev} busy during the compiled step"
    if ok.empty:
        return Figure("busy", title, None, "no finished job has a profiled step")
    ok = ok.assign(group=_groups(ok))
    order = ok.groupby("group")["busy_pct"].median().sort_values().index
    low = ok.nsmallest(TOP_ROWS, "busy_pct")
    height = 2.2 + ROW_IN * max(len(order), len(low))
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, height), gridspec_kw={"width_ratios": [1, 1]})
    rng = np.random.default_rng(0)  # a fixed jitter: the same figure every time
    for i, g in enumerate(order):
        v = ok.loc[ok["group"] == g, "busy_pct"].clip(upper=BUSY_AXIS_TOP)
        a1.scatter(v, i + rng.uniform(-0.25, 0.25, len(v)), s=10, alpha=0.6, color="tab:blue")
        a1.plot([v.median()] * 2, [i - 0.4, i + 0.4], color="black", linewidth=1.5)
    a1.set_yticks(range(len(order)), [f"{g} ({int((ok['group'] == g).sum())})" for g in order], fontsize=FONT)
    a1.set_ylim(len(order) - 0.5, -0.5)
    a1.axvline(100, color="0.5", linewidth=0.8, linestyle="--")
    a1.set_xlim(0, BUSY_AXIS_TOP)
    a1.set_xlabel(f"{dev} busy (%): each job a dot, the bar its group's median", fontsize=FONT + 1)
    a1.set_title(f"{len(ok)} jobs by model family and variant (jobs), least busy first", fontsize=FONT + 1)
    a2.barh(range(len(low)), low["busy_pct"].clip(upper=BUSY_AXIS_TOP), color="tab:orange")
    a2.set_yticks(range(len(low)), list(low["label"]), fontsize=FONT)
    a2.set_ylim(len(low) - 0.5, -0.5)
    a2.set_xlim(0, BUSY_AXIS_TOP)
    a2.axvline(100, color="0.5", linewidth=0.8, linestyle="--")
    a2.set_xlabel(f"{dev} busy (%)", fontsize=FONT + 1)
    rest = ok.drop(low.index)["busy_pct"]
    a2.set_title(f"the {len(low)} least busy jobs" + (f"; the other {len(rest)}: {rest.min():.0f}-{rest.max():.0f}%"
                                                      if len(rest) else ""), fontsize=FONT + 1)
    for a in (a1, a2):
        a.tick_params(axis="x", labelsize=FONT)
    fig.suptitle(title, fontsize=9)
    return Figure("busy", title, _save(fig, out_dir, "busy"), None, tuple(low["label"]))


def compile_ranked(jobs: pd.DataFrame, out_dir: Path) -> Figure:
    """The TOP_ROWS longest compiles by name; the title says what the rest took."""
    ok = jobs.dropna(subset=["compile_s"])
    title = "compile time per job"
    if ok.empty:
        return Figure("compile", title, None, "no job got as far as compiling")
    top = ok.nlargest(TOP_ROWS, "compile_s").iloc[::-1]
    rest = ok.drop(top.index)["compile_s"]
    title = (f"the {len(top)} longest compiles of {len(ok)} jobs"
             + (f" (the others {rest.min():.0f}-{rest.max():.0f} s, median {rest.median():.0f} s)" if len(rest) else ""))
    states = [state_of(row) for _, row in top.iterrows()]
    colors = {False: "tab:blue", True: "tab:orange"}
    hatches = {"cold": "", "seeded": "//", "warm": ".."}
    fig, ax = plt.subplots(figsize=(11, 1.8 + ROW_IN * len(top)))
    ax.barh(range(len(top)), top["compile_s"], color=[colors[bool(a)] for a in top["autotune"]],
            hatch=[hatches[st] for st in states], edgecolor="white")
    ax.set_yticks(range(len(top)), list(top["label"]), fontsize=FONT)
    for tuned, name in ((False, "default"), (True, "max-autotune")):
        ax.barh([0], [0], color=colors[tuned], label=name)
    ax.set_xlabel("first compiled step, compile included (s); hatched: seeded (//) or warm (..)", fontsize=FONT + 1)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.legend(fontsize=FONT, loc="lower right")
    ax.set_title(title, fontsize=9)
    return Figure("compile", title, _save(fig, out_dir, "compile"), None, tuple(top["label"]))


def roofline_by_family(bench: pd.DataFrame, jobs: pd.DataFrame, out_dir: Path) -> Figure:
    """Benchmarked kernels against the bandwidth roofline, coloured by model family (the
    nine largest; the rest grey), the costliest kernels named."""
    title = "kernels against the bandwidth roofline, by model family"
    pts = bench.dropna(subset=["pct_of_peak_bandwidth", "share_of_triton_pct"]) if not bench.empty else bench
    if pts.empty:
        return Figure("roofline", title, None, "no kernel microbenchmarks with bandwidth in these records (they need "
                      "a GPU job with measure.microbench=true)")
    model = dict(zip(jobs["job"], jobs["model"]))
    pts = pts.assign(family=[family(model.get(j, "")) for j in pts["job"]])
    fams = list(pts["family"].value_counts().index)
    named, rest = fams[:9], fams[9:]
    fig, ax = plt.subplots(figsize=(10, 6))
    for i, f in enumerate(named):
        p = pts[pts["family"] == f]
        ax.scatter(p["share_of_triton_pct"], p["pct_of_peak_bandwidth"], s=12, alpha=0.6,
                   color=plt.get_cmap("tab10")(i), label=f"{f} ({p['job'].nunique()} jobs, {len(p)} kernels)")
    if rest:
        p = pts[pts["family"].isin(rest)]
        ax.scatter(p["share_of_triton_pct"], p["pct_of_peak_bandwidth"], s=10, alpha=0.4, color="0.6",
                   label=f"{len(rest)} other families ({len(p)} kernels)")
    ax.axhline(100, color="grey", linestyle="--", linewidth=1)
    for _, k in pts.nlargest(3, "step_ms").iterrows():
        ax.annotate(f"{str(k['kernel'])[:36]} ({k['label'][:30]})", (k["share_of_triton_pct"], k["pct_of_peak_bandwidth"]),
                    fontsize=FONT, xytext=(4, -9), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("kernel's share of its step's Triton time (%, log scale)", fontsize=FONT + 1)
    ax.set_ylabel("achieved bandwidth alone (% of measured peak)", fontsize=FONT + 1)
    ax.set_ylim(0, max(110, float(pts["pct_of_peak_bandwidth"].max()) * 1.05))
    ax.tick_params(labelsize=FONT)
    ax.legend(fontsize=FONT, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(title + f": {len(pts)} kernels of {pts['job'].nunique()} jobs; tables/microbench.csv names each",
                 fontsize=9)
    return Figure("roofline", title, _save(fig, out_dir, "roofline"), None, tuple(named))


def categories_top(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> Figure:
    """Device time by category of each compiled module (forward and backward apart) of the
    TOP_ROWS // 2 jobs with the most device time a step."""
    dev = device_word(jobs)
    ok = _ok(jobs).dropna(subset=["device_ms"]).nlargest(TOP_ROWS // 2, "device_ms")
    title = f"{dev} time by kernel category per compiled module: the {len(ok)} costliest of {len(_ok(jobs))} jobs"
    table = module_bars(cats, list(ok["job"]))
    if table is None:
        return Figure("categories", title, None, "no job has a breakdown (none finished ok)")
    order = {j: i for i, j in enumerate(ok["job"])}
    table = table.sort_index(key=lambda idx: idx.map(order) if idx.name == "job" else idx).droplevel(0)
    table = table[[c for c in CATEGORIES if c in table.columns]]
    fig, ax = plt.subplots(figsize=(12, 1.6 + ROW_IN * len(table)))
    left = pd.Series(0.0, index=table.index)
    for cat in table.columns:
        ax.barh(range(len(table)), table[cat], left=left, color=COLORS.get(cat), label=category_label(cat, dev))
        left += table[cat]
    ax.set_yticks(range(len(table)), list(table.index), fontsize=FONT)
    ax.set_ylim(len(table) - 0.5, -0.5)
    ax.set_xlabel(f"{dev} time per step or module call (ms)", fontsize=FONT + 1)
    ax.tick_params(axis="x", labelsize=FONT)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=FONT)
    ax.set_title(title, fontsize=9)
    return Figure("categories", title, _save(fig, out_dir, "categories"), None, tuple(table.index))
