"""Figures of jobs set side by side (matplotlib, PNG; sweeper/reporting/figures.py draws the
rest): pairs that differ in one key, their step's shares by category, and max-autotune's
pairs with what its templates took over."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.analysis.categories import CATEGORIES, category_label
from sweeper.reporting.figures import COLORS, Figure, _ok, _save, device_word, plt  # plt: set up for files only
from sweeper.reporting.finding import on_gpu
from sweeper.reporting.pairs import MODEL_PAIR


def pairs_figure(jobs: pd.DataFrame, cats: pd.DataFrame, out_dir: Path) -> Figure:
    """Pairs of jobs side by side (sweeper/reporting/pairs.py): those differing in one key
    and the densenet121 / mixnet_l pair, each its two jobs' category shares and busy figures, labelled
    with the key they differ in first."""
    from sweeper.reporting.pairs import all_pairs

    pairs = all_pairs(jobs)
    title = "pairs of jobs side by side: category shares of the step, busy %"
    step = cats[cats["scope"] == "step"]
    pairs = [p for p in pairs if {p.a["job"], p.b["job"]} <= set(step["job"])]
    if len(pairs) > MAX_PAIRS:  # the pairs whose shares differ most; the rest said in the title
        title += f": {MAX_PAIRS} of {len(pairs)} pairs, those whose category shares differ most (one a kind first)"
        pairs = _most_different(pairs, step)[:MAX_PAIRS]
    if not pairs:
        note = "no two finished jobs differ in one key only (cudagraphs, autotune, amp, batch_size)"
        if set(MODEL_PAIR) & set(_ok(jobs)["model"]):  # a sweep of neither model was never after that pair
            note += f", and the sweep lacks a finished {' / '.join(MODEL_PAIR)} pair"
        return Figure("pairs", title, None, note)
    fig, axes = plt.subplots(len(pairs), 1, figsize=(13, 1.2 + 1.3 * len(pairs)), squeeze=False)
    seen: set = set()
    for ax, p in zip(axes[:, 0], pairs):
        rows = [p.a, p.b]
        for i, row in enumerate(rows):
            shares = step[step["job"] == row["job"]].set_index("category")["share_pct"]
            start = 0.0
            for cat in CATEGORIES:
                v = float(shares.get(cat, 0.0))
                if v:
                    ax.barh(i, v, left=start, color=COLORS[cat],
                            label=category_label(cat, device_word(jobs)) if cat not in seen else None)
                    seen.add(cat)
                    start += v
            busy = row.get("busy_pct")
            ax.text(101, i, "busy –" if pd.isna(busy) else f"busy {float(busy):.0f}%", va="center", fontsize=8)
        ax.set_yticks([0, 1], [p.name(r) for r in rows], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 112)
        ax.set_title(p.caption, fontsize=8, loc="left")
    axes[-1, 0].set_xlabel("share of the step's device time (%)")
    fig.suptitle(title, fontsize=10)
    handles = {n: h for ax in axes[:, 0] for h, n in zip(*ax.get_legend_handles_labels())}
    axes[0, 0].legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.08, 1.0), fontsize=7)
    return Figure("pairs", title + ": " + "; ".join(p.caption for p in pairs), _save(fig, out_dir, "pairs"), None,
                  tuple(p.caption for p in pairs))


MAX_PAIRS = 12  # pairs a pairs or autotune figure draws


def _most_different(pairs: list, step: pd.DataFrame) -> list:
    """Pairs ordered by how far apart their two jobs' category shares are (the sum of the
    shares' differences, in points), the most different first."""
    shares = step.pivot_table(index="job", columns="category", values="share_pct", aggfunc="sum").fillna(0)

    def apart(p) -> float:
        a, b = p.a["job"], p.b["job"]
        return float((shares.loc[a] - shares.loc[b]).abs().sum()) if a in shares.index and b in shares.index else 0.0

    from sweeper.reporting.overview import family

    ranked = sorted(pairs, key=lambda p: -apart(p))
    # one pair a kind first (the key they differ in, the model family): twelve copies of one
    # comparison say less than twelve comparisons; the model pair always
    seen: set = set()
    first: list = []
    rest: list = []
    for p in ranked:
        kind = (p.key, family(p.a["model"]))
        (first if kind not in seen or p.key == "model" else rest).append(p)
        seen.add(kind)
    return [p for p in first if p.key == "model"] + [p for p in first if p.key != "model"] + rest


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


def _on_gpu(row: pd.Series) -> bool:
    return on_gpu(row) and pd.notna(row.get("device_ms"))


def _judged_ms(row: pd.Series) -> float:
    """What the autotune verdict judges (sweeper/analysis/autotune_verdict.py): a GPU job's
    kernels' time a step (its step follows the host where the GPU waits), a CPU job's step."""
    value = row["device_ms"] if _on_gpu(row) else row["compiled_step_ms"]
    return float(value) if pd.notna(value) and value else 1.0


def _pair_shares(ax, pairs: list, step: pd.DataFrame) -> None:
    """The autotune figure's second panel: each pair's two steps by category, stacked."""
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
                ax.barh(i, v, left=start, color=COLORS[cat], label=cat if cat not in left else None)
                left[cat] = True
                start += v
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("share of the step's device time (%)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))


def autotune_figure(jobs: pd.DataFrame, cats: pd.DataFrame, bench: pd.DataFrame, out_dir: Path) -> Figure:
    """Per pair of jobs differing only in autotune: step time, the step's category shares,
    and, where microbenchmarks exist, each benchmarked kernel's headroom (chosen config
    against the best candidate config; with autotune on, the chosen config is
    max-autotune's own, which may lie outside the candidates)."""
    title = "max-autotune on against off: kernels' time, category shares"
    pairs = autotune_pairs(jobs)
    if not pairs:
        return Figure("autotune", title, None, "no pair of finished jobs differing only in autotune")
    if len(pairs) > MAX_PAIRS:  # the pairs max-autotune changed most, faster or slower
        title = f"max-autotune on against off, the {MAX_PAIRS} of {len(pairs)} pairs it changed most"
        pairs = sorted(pairs, key=lambda p: -abs(np.log(_judged_ms(p[0]) / _judged_ms(p[1]))))[:MAX_PAIRS]
    pair_jobs = {int(row["job"]) for pair in pairs for row in pair}
    head = bench[bench["job"].isin(pair_jobs)].dropna(subset=["headroom_pct"]) if not bench.empty else bench
    panels = 3 if not head.empty else 2
    if panels == 3:  # the title names only the panels drawn
        title += ", kernel headroom"
    # wide enough for the category key beside the second panel (tight_layout makes room)
    fig, axes = plt.subplots(1, panels, figsize=(4.4 * panels + 1.5, max(3.6, 1.8 + 0.9 * len(pairs))))
    ax1, ax2 = axes[0], axes[1]
    names = [off["label"] for off, _ in pairs]
    y = range(len(pairs))
    what = "kernels' time a step" if all(_on_gpu(off) for off, _ in pairs) else "compiled step"
    if len(pairs) > 4:  # steps of other sizes side by side: each pair's ratio reads, milliseconds do not
        ratio = [_judged_ms(off) / _judged_ms(on) for off, on in pairs]
        ax1.barh(list(y), ratio, height=0.6, color=["tab:green" if r >= 1 else "tab:red" for r in ratio])
        ax1.axvline(1, color="0.4", linewidth=0.8)
        ax1.set_xlabel(f"{what}, off / on (x; over 1: faster with it)")
    else:
        ax1.barh([i - 0.2 for i in y], [_judged_ms(off) for off, _ in pairs], height=0.4, label="autotune off")
        ax1.barh([i + 0.2 for i in y], [_judged_ms(on) for _, on in pairs], height=0.4, label="autotune on")
        ax1.set_xlabel(f"{what} (ms)")
        ax1.legend(fontsize=8)
    ax1.set_yticks(list(y), names, fontsize=8)
    ax1.invert_yaxis()
    _pair_shares(ax2, pairs, cats[cats["scope"] == "step"])
    if panels == 3:
        ax3 = axes[2]
        rows = [(f"{off['model']} {tag}", row["job"]) for off, on in pairs for row, tag in ((off, "off"), (on, "on"))]
        for i, (name, job) in enumerate(rows):
            h = head[head["job"] == job]
            ax3.scatter(h["headroom_pct"], [i] * len(h), s=14, alpha=0.7, color="tab:purple")
        ax3.axvline(0, color="grey", linewidth=1)
        ax3.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
        ax3.invert_yaxis()
        ax3.set_xlabel("per kernel: best candidate config\nfaster than the chosen (%)")
    fig.suptitle(title)
    return Figure("autotune", title, _save(fig, out_dir, "autotune"), None, tuple(names))
