"""Cross-run figures of a sweep (matplotlib, PNG), drawn from the tables in tables.py.

Each function returns a Figure result: the PNG's path, or None with a note saying why the
figure does not apply (one job, failed jobs, no GPU data, no autotune pair), so that the
report can say so instead of showing an empty axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on CI or a cluster node
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from sweeper.categories import CATEGORIES  # noqa: E402

# One colour per category in every figure.
COLORS = dict(zip(CATEGORIES, plt.get_cmap("tab20").colors[::2] + plt.get_cmap("tab20").colors[1::2]))


@dataclass
class Figure:
    name: str
    title: str
    path: Path | None
    note: str | None = None
    jobs: tuple[str, ...] = ()  # the labels drawn, for tests and the report


def _save(fig, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _ok(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs[jobs["status"] == "ok"]


def categories_figure(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> Figure:
    title = "GPU time by kernel category, per job and compiled module"
    ok = _ok(jobs)
    modules = cats[(cats["scope"] != "step") & cats["job"].isin(ok["job"])]
    # Forward and backward apart: one bar per job x module. Jobs without a module view
    # (CUDA graphs) show their step.
    missing = set(ok["job"]) - set(modules["job"])
    rows = pd.concat([modules, cats[(cats["scope"] == "step") & cats["job"].isin(missing)]])
    if rows.empty:
        return Figure("categories", title, None, "no job has a breakdown (none finished ok)")
    rows = rows.assign(bar=rows["label"] + "  ·  " + rows["scope"])
    table = rows.pivot_table(index=["job", "bar"], columns="category", values="device_ms", aggfunc="sum").fillna(0)
    table = table.droplevel(0)
    table = table[[c for c in CATEGORIES if c in table.columns]]
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.45 * len(table)))
    left = pd.Series(0.0, index=table.index)
    for cat in table.columns:
        ax.barh(table.index, table[cat], left=left, color=COLORS.get(cat), label=cat)
        left += table[cat]
    ax.invert_yaxis()
    ax.set_xlabel("device time per step or module call (ms)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return Figure("categories", title, _save(fig, out_dir, "categories"), None, tuple(table.index))


def busy_figure(jobs: pd.DataFrame, out_dir: Path) -> Figure:
    title = "GPU busy during the compiled step"
    ok = _ok(jobs).dropna(subset=["busy_pct"])
    if ok.empty:
        return Figure("busy", title, None, "no finished job has a profiled step")
    # Grouped by model, then variant, so that e.g. cudagraphs on against off sit together.
    ok = ok.sort_values(["model", "batch_size", "label"])
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(ok) + 2), 4.5))
    x = range(len(ok))
    ax.bar([i - 0.2 for i in x], ok["busy_pct"], width=0.4, label="union of kernel intervals")
    ax.bar([i + 0.2 for i in x], ok["busy_pct_reference_style"], width=0.4,
           label="summed kernel time / step time (as -p prints)")
    ax.set_xticks(list(x), ok["label"], rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.8, len(ok) - 0.2)
    ax.set_ylim(0, max(100.0, float(ok["busy_pct_reference_style"].max()) * 1.05))
    ax.set_ylabel("GPU busy (%)" if (ok["device"] == "cuda").any() else "device busy (%)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return Figure("busy", title, _save(fig, out_dir, "busy"), None, tuple(ok["label"]))


def autotune_pairs(jobs: pd.DataFrame) -> list[tuple[pd.Series, pd.Series]]:
    """(off, on) rows of finished jobs that differ only in autotune."""
    ok = _ok(jobs)
    pairs = []
    base = ok.assign(other=ok["key"].str.replace(r"autotune=\w+", "", regex=True))
    for _, group in base.groupby("other"):
        off, on = group[group["autotune"] == False], group[group["autotune"] == True]  # noqa: E712
        if len(off) and len(on):
            pairs.append((off.iloc[0], on.iloc[0]))
    return pairs


def autotune_figure(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> Figure:
    title = "max-autotune on against off: step time and category shares"
    pairs = autotune_pairs(jobs)
    if not pairs:
        return Figure("autotune", title, None, "no pair of finished jobs differing only in autotune")
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 1.5 + 0.9 * len(pairs)))
    names = [off["label"] for off, _ in pairs]
    y = range(len(pairs))
    ax1.barh([i - 0.2 for i in y], [off["compiled_step_ms"] for off, _ in pairs], height=0.4, label="autotune off")
    ax1.barh([i + 0.2 for i in y], [on["compiled_step_ms"] for _, on in pairs], height=0.4, label="autotune on")
    ax1.set_yticks(list(y), names, fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlabel("compiled step (ms)")
    ax1.legend(fontsize=8)
    step = cats[cats["scope"] == "step"]
    bars, left = [], {}
    for off, on in pairs:
        for row, tag in ((off, "off"), (on, "on")):
            shares = step[step["job"] == row["job"]].set_index("category")["share_pct"]
            bars.append((f"{off['model']} {tag}", shares))
    for i, (name, shares) in enumerate(bars):
        start = 0.0
        for cat in CATEGORIES:
            v = float(shares.get(cat, 0.0))
            if v:
                ax2.barh(i, v, left=start, color=COLORS[cat], label=cat if cat not in left else None)
                left[cat] = True
                start += v
    ax2.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ax2.invert_yaxis()
    ax2.set_xlabel("share of the step's device time (%)")
    ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(title)
    return Figure("autotune", title, _save(fig, out_dir, "autotune"), None, tuple(names))


def roofline_figure(out_dir: Path) -> Figure:
    """Placeholder note until result records carry per-kernel microbenchmarks (issue 3):
    the figure needs achieved bandwidth per kernel, which no record has yet."""
    return Figure("roofline", "kernels against the bandwidth roofline", None,
                  "no kernel microbenchmarks in these records (per-kernel benchmarks are not built yet)")


def compile_figure(jobs: pd.DataFrame, out_dir: Path) -> Figure:
    title = "compile time per job"
    ok = jobs.dropna(subset=["compile_s"])
    if ok.empty:
        return Figure("compile", title, None, "no job got as far as compiling")
    ok = ok.sort_values("compile_s")
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.4 * len(ok)))
    ax.barh(ok["label"], ok["compile_s"], color=["tab:orange" if a else "tab:blue" for a in ok["autotune"]])
    ax.set_xlabel("first compiled step, compile included (s); orange: max-autotune")
    ax.set_title(title)
    return Figure("compile", title, _save(fig, out_dir, "compile"), None, tuple(ok["label"]))


def all_figures(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> list[Figure]:
    return [categories_figure(jobs, cats, out_dir), busy_figure(jobs, out_dir),
            autotune_figure(jobs, cats, out_dir), roofline_figure(out_dir), compile_figure(jobs, out_dir)]
