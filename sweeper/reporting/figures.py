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

from sweeper.analysis.categories import CATEGORIES, category_label  # noqa: E402
from sweeper.reporting.compile_state import state_of  # noqa: E402

# One colour per category in every figure.
_TAB20 = [plt.get_cmap("tab20")(i) for i in range(20)]  # its 20 colours, in its order (the Colormap itself has no .colors in its type)
COLORS = dict(zip(CATEGORIES, _TAB20[::2] + _TAB20[1::2]))


@dataclass
class Figure:
    name: str
    title: str
    path: Path | None
    note: str | None = None
    jobs: tuple[str, ...] = ()  # the labels drawn, for tests and the report


DPI = 110
# The report shows a figure at most this wide (its page's width, report._STYLE): a wider
# PNG is scaled down, and its text with it.
DISPLAY_WIDTH_PX = 1300
# Above this many finished jobs a figure of one bar (or one legend entry) a job becomes a
# strip: the figures then group jobs by model family and variant, or show the top ones and
# say how many they leave out.
MANY_JOBS = 24
TOP_ROWS = 30  # rows a ranked figure keeps
HEATMAP_ROWS = 60  # rows of the shares heatmap: jobs up to this many, else family x variant groups
MIN_TEXT_PX = 8.0  # the smallest text a figure may show at its displayed size

# path -> (width px, smallest text's height px as displayed); read by tests and the bench
GEOMETRY: dict[str, tuple[int, float]] = {}


def text_px(fig) -> float:
    """The smallest text of a figure, in pixels as the report shows it: font size (points)
    at DPI, scaled down as the page scales the PNG to DISPLAY_WIDTH_PX."""
    from matplotlib.text import Text

    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    width = fig.get_figwidth() * DPI
    return (min(sizes) if sizes else 10.0) * DPI / 72 * min(1.0, DISPLAY_WIDTH_PX / width)


def save(fig, path: Path) -> Path:
    """Write a figure as PNG (tight layout, DPI) and free it; its geometry is kept in GEOMETRY."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    GEOMETRY[str(path)] = (int(fig.get_figwidth() * DPI), round(text_px(fig), 2))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _save(fig, out_dir: Path, name: str) -> Path:
    return save(fig, out_dir / f"{name}.png")


def _ok(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs[jobs["status"] == "ok"]


def device_word(jobs: pd.DataFrame) -> str:
    """What ran the kernels, as figures and the report name it: GPU, CPU, or device for a
    sweep of both."""
    ok = _ok(jobs)
    gpus = ok["gpu"].notna() if "gpu" in ok else pd.Series(dtype=bool)
    if len(gpus) and gpus.all():
        return "GPU"
    return "CPU" if len(gpus) and not gpus.any() else "device"


BUSY_AXIS_TOP = 120.0  # busy figures' axis: a bar beyond (a contended CPU job) is clipped, its value written


def module_bars(cats: pd.DataFrame, jobs: list) -> pd.DataFrame | None:
    """Device ms by category (columns) of each bar, a job x compiled module (index: job,
    "label  ·  module"): forward and backward apart; a job without a module view (CUDA
    graphs) shows its step. None where none of `jobs` has a breakdown."""
    modules = cats[(cats["scope"] != "step") & cats["job"].isin(jobs)]
    missing = set(jobs) - set(modules["job"])
    rows = pd.concat([modules, cats[(cats["scope"] == "step") & cats["job"].isin(missing)]])
    if rows.empty:
        return None
    rows = rows.assign(bar=rows["label"] + "  ·  " + rows["scope"])
    return rows.pivot_table(index=["job", "bar"], columns="category", values="device_ms", aggfunc="sum").fillna(0)


def categories_figure(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> Figure:
    title = f"{device_word(jobs)} time by kernel category, per job and compiled module"
    table = module_bars(cats, list(_ok(jobs)["job"]))
    if table is None:
        return Figure("categories", title, None, "no job has a breakdown (none finished ok)")
    table = table.droplevel(0)
    table = table[[c for c in CATEGORIES if c in table.columns]]
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.45 * len(table)))
    left = pd.Series(0.0, index=table.index)
    for cat in table.columns:
        ax.barh(table.index, table[cat], left=left, color=COLORS.get(cat), label=category_label(cat, device_word(jobs)))
        left += table[cat]
    ax.invert_yaxis()
    ax.set_xlim(0, float(left.max()) * 1.08 or 1)  # headroom: the longest bar stops short of the frame
    ax.set_xlabel(f"{device_word(jobs)} time per step or module call (ms)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return Figure("categories", title, _save(fig, out_dir, "categories"), None, tuple(table.index))


def job_order(jobs: pd.DataFrame) -> pd.DataFrame:
    """Finished jobs in the order every per-job figure draws them: by model, then batch,
    then variant, so that e.g. cudagraphs on against off sit together."""
    return _ok(jobs).sort_values(["model", "batch_size", "label"])


def _stacked(ax, table: pd.DataFrame, legend: bool, device: str) -> None:
    left = pd.Series(0.0, index=table.index)
    for cat in table.columns:
        ax.barh(range(len(table)), table[cat], left=left, color=COLORS.get(cat),
                label=category_label(cat, device) if legend else None)
        left += table[cat]


def shares_figure(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> Figure:
    """Each job's compiled step by kernel category: shares of its device time as 100%
    stacked bars (left), so that a small-batch job reads as well as a large one, and the
    same in milliseconds a step (right)."""
    dev = device_word(jobs)
    title = f"{dev} time of the compiled step by kernel category: shares (left), ms a step (right)"
    ok = job_order(jobs)
    step = cats[(cats["scope"] == "step") & cats["job"].isin(ok["job"])]
    if step.empty:
        return Figure("shares", title, None, "no finished job has a profiled step")
    order = [j for j in ok["job"] if j in set(step["job"])]
    labels = dict(zip(ok["job"], ok["label"]))
    shares = step.pivot_table(index="job", columns="category", values="share_pct", aggfunc="sum").reindex(order).fillna(0)
    ms = step.pivot_table(index="job", columns="category", values="device_ms", aggfunc="sum").reindex(order).fillna(0)
    cols = [c for c in CATEGORIES if c in shares.columns]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(15, 2.2 + 0.42 * len(order)), sharey=True)
    _stacked(a1, shares[cols], legend=True, device=dev)
    _stacked(a2, ms[cols], legend=False, device=dev)
    a1.set_yticks(range(len(order)), [labels[j] for j in order], fontsize=8)
    a1.invert_yaxis()
    a1.set_xlim(0, 100)
    a1.set_xlabel(f"share of the step's {dev} time (%)")
    a2.set_xlim(0, float(ms[cols].sum(axis=1).max()) * 1.08 or 1)
    a2.set_xlabel(f"{dev} time a step (ms)")
    fig.suptitle(title, fontsize=10)
    handles, names = a1.get_legend_handles_labels()
    a2.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    return Figure("shares", title, _save(fig, out_dir, "shares"), None, tuple(labels[j] for j in order))


def busy_figure(jobs: pd.DataFrame, out_dir: Path) -> Figure:
    title = f"{device_word(jobs)} busy during the compiled step"
    ok = _ok(jobs).dropna(subset=["busy_pct"])
    if ok.empty:
        return Figure("busy", title, None, "no finished job has a profiled step")
    ok = job_order(ok)  # the shares figure's order
    bars = [("busy_pct", "busy: kernel intervals / step time"),
            ("nvml_util_pct", "NVML utilization"),
            ("busy_pct_reference_style", "summed kernel time / step time (-p)")]
    bars = [(col, text) for col, text in bars if col in ok and ok[col].notna().any()]
    width = 0.8 / len(bars)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(ok) + 2), 4.5))
    x = range(len(ok))
    for n, (col, text) in enumerate(bars):
        xs = [i - 0.4 + width * (n + 0.5) for i in x]
        ax.bar(xs, ok[col].clip(upper=BUSY_AXIS_TOP), width=width, label=text)
        for xi, v in zip(xs, ok[col]):  # every bar stays readable: one past the axis says its value
            if pd.notna(v) and v > BUSY_AXIS_TOP:
                ax.text(xi, BUSY_AXIS_TOP, f"{v:.0f}%", ha="center", va="bottom", fontsize=7, rotation=90)
    ax.set_xticks(list(x), ok["label"], rotation=20, ha="right", fontsize=8)
    ax.set_xlim(-0.8, len(ok) - 0.2)
    ax.axhline(100, color="0.5", linewidth=0.8, linestyle="--")
    ax.text(-0.75, 101, "100%", fontsize=7, color="0.4", va="bottom")
    ax.set_ylim(0, BUSY_AXIS_TOP * 1.25)  # headroom for the key and the clipped bars' values
    ax.set_ylabel(f"{device_word(jobs)} busy (%)")
    ax.set_title(title)
    ax.legend(fontsize=8, loc="upper center", ncol=len(bars), frameon=False)
    return Figure("busy", title, _save(fig, out_dir, "busy"), None, tuple(ok["label"]))


def roofline_figure(bench: pd.DataFrame, out_dir: Path) -> Figure:
    """Each benchmarked kernel at its share of the step's Triton time (x) and the share of
    the measured peak bandwidth it reached alone (y). Kernels far below the line and far to
    the right are the ones worth optimizing; near 100% they are bandwidth-bound already."""
    title = "kernels against the bandwidth roofline"
    pts = bench.dropna(subset=["pct_of_peak_bandwidth", "share_of_triton_pct"]) if not bench.empty else bench
    if pts.empty:
        return Figure("roofline", title, None,
                      "no kernel microbenchmarks with bandwidth in these records (they need a GPU job "
                      "with measure.microbench=true)")
    fig, ax = plt.subplots(figsize=(9, 5.5))
    labels = list(dict.fromkeys(pts["label"]))
    for i, label in enumerate(labels):
        p = pts[pts["label"] == label]
        ax.scatter(p["share_of_triton_pct"], p["pct_of_peak_bandwidth"], s=18, alpha=0.75,
                   color=plt.get_cmap("tab10")(i % 10), label=f"{label} ({len(p)} kernels)")
    ax.axhline(100, color="grey", linestyle="--", linewidth=1)
    ax.text(ax.get_xlim()[1], 101, "measured peak (device-to-device copy)", ha="right", va="bottom", fontsize=7)
    for _, k in pts.nlargest(3, "step_ms").iterrows():  # name the costliest few
        ax.annotate(str(k["kernel"])[:40], (k["share_of_triton_pct"], k["pct_of_peak_bandwidth"]),
                    fontsize=6, xytext=(4, -8), textcoords="offset points")
    ax.set_xscale("log")
    # Above 100%: kernel_num_gb counts bytes the kernel need not fetch from memory (e.g. a
    # broadcast operand, or data still in the 50 MB L2): it is an estimate, not a count.
    ax.set_xlabel("kernel's share of the step's Triton time (%, log scale)\n"
                  "(above 100%: the kernel's own byte estimate, kernel_num_gb, exceeds what it fetched)", fontsize=8)
    ax.set_ylabel("achieved bandwidth alone (% of measured peak)")
    ax.set_ylim(0, max(110, float(pts["pct_of_peak_bandwidth"].max()) * 1.05))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(title)
    return Figure("roofline", title, _save(fig, out_dir, "roofline"), None, tuple(labels))


def compile_figure(jobs: pd.DataFrame, out_dir: Path) -> Figure:
    title = "compile time per job"
    ok = jobs.dropna(subset=["compile_s"])
    if ok.empty:
        return Figure("compile", title, None, "no job got as far as compiling")
    ok = ok.sort_values("compile_s")
    fig, ax = plt.subplots(figsize=(9, 1.6 + 0.4 * len(ok)))
    colors = {False: "tab:blue", True: "tab:orange"}
    # a max-autotune compile seeded from the autotune store skipped the tuning it found there,
    # a warm one (the compile store's earlier compile of the job) compiled nothing: hatched,
    # so that cold compiles are compared with cold ones
    states = [state_of(row) for _, row in ok.iterrows()]
    hatches = {"cold": "", "seeded": "//", "warm": ".."}
    ax.barh(range(len(ok)), ok["compile_s"], color=[colors[bool(a)] for a in ok["autotune"]],
            hatch=[hatches[s] for s in states], edgecolor="white")
    ax.set_yticks(range(len(ok)), ok["label"])
    for tuned, name in ((False, "default"), (True, "max-autotune")):  # the key, for the colours used
        if (ok["autotune"].astype(bool) == tuned).any():
            ax.barh([0], [0], color=colors[tuned], label=name)
    if "seeded" in states:
        ax.barh([0], [0], color=colors[True], hatch="//", edgecolor="white", label="max-autotune, seeded from the autotune store")
    if "warm" in states:
        ax.barh([0], [0], color="tab:gray", hatch="..", edgecolor="white", label="warm: loaded from the compile store")
    ax.set_xlim(0, float(ok["compile_s"].max()) * 1.1)
    ax.set_xlabel("first compiled step, compile included (s)")
    ax.legend(fontsize=8, loc="lower right")  # the key inside the figure
    ax.set_title(title)
    return Figure("compile", title, _save(fig, out_dir, "compile"), None, tuple(ok["label"]))
