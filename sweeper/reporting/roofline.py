"""The sweep's ranking of what is left to win (pure: tables in; a table, a finding and a
figure out): every job's launch sites against its device's roofs (the record's
`roofline`, sweeper/analysis/roofline.py), ranked over the whole sweep by the milliseconds a
step above their bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from sweeper.analysis.launch_sites import is_extern  # noqa: E402
from sweeper.analysis.categories import LIBRARY, TRITON_TEMPLATE, category_label  # noqa: E402
from sweeper.reporting.figures import Figure, _save  # noqa: E402
from sweeper.reporting.finding import Finding  # noqa: E402

TOP_TO_WIN = 10  # launches the finding and the overview's table name


def ranking(recoverable: pd.DataFrame, top: int | None = None) -> pd.DataFrame:
    """The sweep's launch sites, most to win first."""
    ranked = recoverable.dropna(subset=["recoverable_ms"]).sort_values("recoverable_ms", ascending=False)
    return (ranked.head(top) if top else ranked).reset_index(drop=True)


def _typical_ms(row) -> float:
    """A launch's time in its median profiled step (records before it: the mean)."""
    v = row.get("typical_ms") if hasattr(row, "get") else None
    return float(row["device_ms"] if v is None or pd.isna(v) else v)


def _ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 100 else (f"{x:.1f} ms" if x >= 10 else f"{x:.2f} ms")


def _kind(row) -> str:
    """Words for a launch site: "library convolution", "Triton template", "Triton pointwise".
    A library call's site is a library convolution or matmul whatever kernel of it costs most
    (a cuDNN convolution's backward launches ATen kernels too: a cast, the bias gradient)."""
    site = str(row["site"])
    if row["category"] == LIBRARY or is_extern(site.rsplit(":", 1)[0]):
        return "library convolution" if "conv" in site else "library matmul" if "mm" in site else "library kernel"
    return category_label(row["category"], "device").split(" (")[0]


def most_to_win(jobs: pd.DataFrame, recoverable: pd.DataFrame) -> list[Finding]:
    """The first screen's answer to "which kernels are worth optimizing": how much of the
    sweep's kernel time is above the roofs, and the launches with the most of it, by kind,
    with how far from its roof each kind runs."""
    ok = jobs[(jobs["status"] == "ok")] if "recoverable_ms" in jobs else jobs.iloc[0:0]
    ok = ok.dropna(subset=["recoverable_ms"])
    if ok.empty or recoverable.empty:
        return []
    total, left = float(ok["device_ms"].sum()), float(ok["recoverable_ms"].sum())
    known = float((ok["device_ms"] * ok["roofline_known_pct"] / 100).sum())
    top = ranking(recoverable[recoverable["job"].isin(ok["job"])], TOP_TO_WIN)
    if top.empty:
        return []
    kinds = top.assign(kind=[_kind(r) for _, r in top.iterrows()])
    kind, group = max(kinds.groupby("kind"), key=lambda g: len(g[1]))  # the kind most of them are
    eff = group["efficiency_pct"].dropna()
    dtypes = group["dtype"].dropna().unique()
    roof = ("its " + dtypes[0] + " matmul peak" if len(dtypes) == 1 and (group["bound_by"] == "compute").all()
            else "the copy bandwidth" if (group["bound_by"] == "memory").all() else "their roofs")
    first = top.iloc[0]
    where = f" at {first['module']}" if isinstance(first["module"], str) and first["module"] else ""
    text = (f"Left to win: {_ms(left)} a step over the sweep ({100 * left / total:.0f}% of its kernel time) is above the "
            f"device's roofs (measured copy bandwidth and matmul peak per dtype), where the work is known "
            f"({100 * known / total:.0f}% of the time); most in " + ", ".join(
                f"{r['label']} ({_ms(float(r['recoverable_ms']))} of its {_ms(float(r['device_ms']))})"
                for _, r in ok.nlargest(3, "recoverable_ms").iterrows())
            + (f" and {len(ok) - 3} more jobs" if len(ok) > 3 else "")
            + f". The {len(top)} launches with the most to win hold "
            f"{_ms(float(top['recoverable_ms'].sum()))}: {'all ' if len(group) == len(top) else ''}{len(group)} are {kind}s"
            + (f" at {eff.min():.0f}-{eff.max():.0f}% of {roof}" if len(eff) else "")
            + f"; the first, {str(first['kernel'])[:60]}{where} in {first['label']}, "
              f"{_ms(_typical_ms(first))} a step against a bound of {_ms(float(first['bound_ms']))}.")
    return [Finding("most_to_win", "across jobs", text, "#fig-roofline",
                    {"recoverable_ms": left, "known_pct": 100 * known / total, "top_ms": float(top["recoverable_ms"].sum())})]


_MARKERS = {LIBRARY: "s", TRITON_TEMPLATE: "D"}


def roofs_figure(recoverable: pd.DataFrame, jobs: pd.DataFrame, out_dir: Path, by_family: bool = False) -> Figure:
    """Each job's launch sites with the most to win against both roofs: achieved TFLOP/s over
    arithmetic intensity (FLOPs a byte) for those with FLOPs, under the copy-bandwidth slope
    and each dtype's matmul peak; those without FLOPs (pointwise and reduction kernels) at
    their achieved GB/s under the copy bandwidth. Coloured by category (by model family
    for a large sweep); each job's three costliest to win are numbered, their names in a
    key below the panels (at most 30)."""
    from sweeper.reporting.figures import device_word

    title = "launches against the roofs (copy bandwidth, matmul peak per dtype)"
    rows = recoverable.dropna(subset=["bound_ms"]) if not recoverable.empty else recoverable
    ok = jobs[jobs["status"] == "ok"]
    rows = rows[rows["job"].isin(ok["job"])] if len(rows) else rows
    if rows.empty:
        return Figure("roofline", title, None, "no launch with known work in these records (the roofline is recorded "
                                               "by jobs of this sweeper version: each job's `roofline`)")
    flop, mem = rows[rows["flops"].fillna(0) > 0], rows[rows["flops"].fillna(0) <= 0]
    marked = [r for _, r in pd.concat([ranking(rows[rows["job"] == j], 3) for j in rows["job"].unique()]).iterrows()
              if pd.notna(r["flops"] / r["bytes"] if (r["flops"] or 0) > 0 else r["device_ms"])
              and pd.notna(r["tflops_per_s"] if (r["flops"] or 0) > 0 else r["gb_per_s"])][:30]
    key = [f"{i + 1} {str(r['module'] or r['kernel'])[:48]} ({r['label']})" for i, r in enumerate(marked)]
    half = (len(key) + 1) // 2
    # the names of the numbered points in a row of their own below the panels: long names
    # at close points overprinted each other
    key_in = half * 7 * 1.35 / 72 + 0.1
    fig = plt.figure(figsize=(12, 5.5 + key_in))
    grid = fig.add_gridspec(2, 2, width_ratios=[3, 2], height_ratios=[5.5, key_in])
    ax1, ax2, kax = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])
    kax.axis("off")
    _points(ax1, ax2, flop, mem, _colour_key(rows, ok, by_family), by_family, device_word(jobs))
    bandwidth = float(ok["copy_gbps"].dropna().iloc[0]) if ok["copy_gbps"].notna().any() else None
    if bandwidth and len(flop):
        _compute_roofs(ax1, flop, bandwidth, _peaks(ok))
    _copy_roof(ax2, mem, bandwidth)
    _axes(ax1, ax2, mem)
    fig.suptitle(title)
    for col, part in enumerate((key[:half], key[half:])):
        kax.text(0.5 * col, 1.0, "\n".join(part), fontsize=7, va="top", ha="left", family="monospace",
                 transform=kax.transAxes)
    fig.tight_layout()  # before the numbers are placed: they are kept apart where they will be drawn
    place_labels(fig, [((ax1, r["flops"] / r["bytes"], r["tflops_per_s"]) if (r["flops"] or 0) > 0
                        else (ax2, r["device_ms"], r["gb_per_s"])) + (str(i + 1),) for i, r in enumerate(marked)])
    labels = tuple(dict.fromkeys(rows["label"].dropna())) if "label" in rows else ()
    return Figure("roofline", title, _save(fig, out_dir, "roofline"), None, labels)


def place_labels(fig, points: list[tuple[Any, float, float, str]]) -> list:
    """Short labels at data points, none overlapping another: each tries offsets around its
    point, nearest first, and takes the first whose box meets no label placed before
    (the last tried where none is free). Returns the annotations."""
    offsets = [(4, 4), (4, -10), (-10, 4), (-10, -10), (8, 12), (8, -18), (-18, 12), (-18, -18),
               (14, 0), (-22, 0), (0, 16), (0, -22), (22, 20), (22, -26), (-28, 20), (-28, -26)]
    renderer = fig.canvas.get_renderer()
    placed_boxes: list = []
    out = []
    for ax, x, y, text in points:
        for dx, dy in offsets:
            note = ax.annotate(text, (x, y), fontsize=7, xytext=(dx, dy), textcoords="offset points",
                               fontweight="bold")
            box = note.get_window_extent(renderer).expanded(1.05, 1.1)
            if not any(box.overlaps(b) for b in placed_boxes) or (dx, dy) == offsets[-1]:
                break
            note.remove()
        placed_boxes.append(box)
        out.append(note)
    return out


def _colour_key(rows: pd.DataFrame, ok: pd.DataFrame, by_family: bool) -> pd.Series:
    """What colours each row: its category, or its job's model family."""
    if not by_family:
        return rows["category"]
    from sweeper.reporting.overview import family

    return rows["job"].map(dict(zip(ok["job"], ok["model"].map(family))))


def _points(ax1, ax2, flop: pd.DataFrame, mem: pd.DataFrame, key: pd.Series, by_family: bool, device: str) -> None:
    """The rows with FLOPs on the left, the others on the right, a colour a group of `key`."""
    for i, g in enumerate(dict.fromkeys(key)):
        colour = plt.get_cmap("tab10")(i % 10)
        f, m = flop[key.loc[flop.index] == g], mem[key.loc[mem.index] == g]
        name = g if by_family else category_label(g, device).split(" (")[0]
        if len(f):
            ax1.scatter(f["flops"] / f["bytes"], f["tflops_per_s"], s=16, alpha=0.75, color=colour, label=name,
                        marker="o" if by_family else _MARKERS.get(g, "o"))
        if len(m):
            ax2.scatter(m["device_ms"], m["gb_per_s"], s=16, alpha=0.75, color=colour, label=None if len(f) else name)


def _compute_roofs(ax, flop: pd.DataFrame, bandwidth: float, peaks: dict[str, float]) -> None:
    """The bandwidth slope up to each peak of the dtypes these launches use, each named."""
    import numpy as np

    intensity = flop["flops"] / flop["bytes"]
    xs = np.logspace(np.log10(max(float(intensity.min()) / 2, 1e-2)), np.log10(float(intensity.max()) * 2), 100)
    in_use = {d: peaks[d] for d in flop["dtype"].dropna().unique() if d in peaks}
    placed: list[float] = []
    for dtype, peak in sorted(in_use.items(), key=lambda kv: -kv[1]):
        ax.plot(xs, np.minimum(xs * bandwidth / 1e3, peak), linestyle="--", linewidth=1, color="grey")
        # two peaks within 15% of each other (fp16 and bf16): the second's label goes under its line
        under = any(abs(peak / p - 1) < 0.15 for p in placed)
        ax.text(xs[-1], peak, f"{dtype} {peak:.3g} TFLOP/s", ha="right", va="top" if under else "bottom", fontsize=8)
        placed.append(peak)


def _copy_roof(ax, mem: pd.DataFrame, bandwidth: float | None) -> None:
    if mem.empty:
        ax.text(0.5, 0.5, "no launch without FLOPs has known bytes\n(a C++ kernel has no estimate)", ha="center",
                va="center", fontsize=9, transform=ax.transAxes)
    elif bandwidth:
        ax.axhline(bandwidth, color="grey", linestyle="--", linewidth=1)
        ax.text(ax.get_xlim()[1], bandwidth, f"copy {bandwidth:.0f} GB/s", ha="right", va="bottom", fontsize=8)


def _axes(ax1, ax2, mem: pd.DataFrame) -> None:
    """Scales, labels, titles and one legend for both panels."""
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("arithmetic intensity (FLOPs a byte, log)")
    ax1.set_ylabel("achieved TFLOP/s (log)")
    ax1.set_title("with FLOPs: matmuls, convolutions, templates", fontsize=9)
    if len(mem):
        from matplotlib.ticker import NullFormatter

        ax2.set_xscale("log")
        ax2.xaxis.set_minor_formatter(NullFormatter())
    ax2.set_xlabel("device ms a step (log)")
    ax2.set_ylabel("achieved GB/s")
    ax2.set_title("without FLOPs: against the copy bandwidth", fontsize=9)
    handles, names = ax1.get_legend_handles_labels()
    more = ax2.get_legend_handles_labels()
    if handles or more[0]:
        ax1.legend(handles + more[0], names + more[1], fontsize=8, loc="upper left")


def _peaks(ok: pd.DataFrame) -> dict[str, float]:
    """The matmul peaks of the sweep's first job that has them, {dtype: TFLOP/s}."""
    for text in ok["matmul_tflops"].dropna():
        out = {}
        for part in str(text).split(", "):
            dtype, _, value = part.partition(" ")
            try:
                out[dtype] = float(value)
            except ValueError:
                continue
        if out:
            return out
    return {}
