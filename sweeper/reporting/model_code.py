"""The step's time by model code, in sentences and a figure (pure: tables in, findings and
a drawing out). Reads the modules table (tables.MODEL_MODULE_COLUMNS: one row a job, leaf
module, pass and category) that sweeper/analysis/attribution.py fills.

Rules (docs/method.md, "Time by model code"):
- where_in_model: every finished job with the table, first on the page: the block that
  holds most of its step's device time, forward and backward apart, its costliest layer
  with its class, category and source line, and how much of the time inside compiled
  graphs was placed at all. The block is the shallowest level of the module tree whose
  costliest entry holds under BLOCK_MAX_SHARE_PCT of the step (densenet121's `features`
  holds all of it; its `features.denseblock3` does not).
- module_pairs: each pair of jobs that differs only in max-autotune or CUDA graphs,
  compared block by block: the blocks where the step's time moved most.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sweeper.analysis.module_rollup import block_of
from sweeper.analysis.categories import CATEGORIES, category_label
from sweeper.reporting.finding import Finding, ms_text, number, ok_jobs, by_job
from sweeper.reporting.pairs import one_key_pairs
from sweeper.reporting.tables import OUTSIDE_ROW

BLOCK_MAX_SHARE_PCT = 60.0
PAIR_KEYS = ("autotune", "cudagraphs")
PAIR_BLOCKS_SAID = 2  # blocks a pair's finding names
PAIR_MIN_MS = 0.05  # a block that moved less a step is not named
FIGURE_MODULES = 15  # costliest modules a job's panel draws
FIGURE_JOBS = 6  # panels


def rollup(rows: pd.DataFrame, depth: int) -> pd.Series:
    """ms a step by block of `depth` components (module_rollup.block_of: a layer counts in
    each block that holds it), costliest first."""
    return rows.groupby(_blocks(rows, depth), sort=False)["device_ms"].sum().sort_values(ascending=False)


def _blocks(rows: pd.DataFrame, depth: int) -> pd.Series:
    return rows["module"].map(lambda p: block_of(p, depth))


def block_depth(rows: pd.DataFrame) -> int:
    """The shallowest depth whose costliest entry holds under BLOCK_MAX_SHARE_PCT of the
    rows' time (1 if none does: a flat model)."""
    total = float(rows["device_ms"].sum())
    deepest = int(rows["module"].map(lambda p: len(str(p).split(".")) if p else 0).max() or 1)
    for depth in range(1, deepest + 1):
        top = rollup(rows, depth)
        if total > 0 and len(top) and float(top.iloc[0]) / total * 100 < BLOCK_MAX_SHARE_PCT:
            return depth
    return 1


def where_in_model(jobs: pd.DataFrame, modules: pd.DataFrame, kernels: pd.DataFrame) -> list[Finding]:
    out = []
    rows_of = by_job(modules)
    step_kernels = kernels[kernels["scope"] == "step"] if "scope" in kernels else kernels
    kernels_of = by_job(step_kernels)
    for _, r in ok_jobs(jobs).iterrows():
        mine = rows_of.get(r["job"])
        if mine is None or mine.empty or float(mine["device_ms"].sum()) <= 0:
            continue
        typical = _typical_rows(mine)
        dev = "GPU" if isinstance(r.get("gpu"), str) and r.get("gpu") else "CPU"
        total = number(r.get("device_ms")) or float(mine["device_ms"].sum())
        if typical is not None:  # the step's time less what its typical step's layers spent less
            total -= float(mine["device_ms"].sum()) - float(typical["device_ms"].sum())
            mine = typical
        # the eager code between graphs is no block of the model: said after it, with what runs there
        in_graphs = mine[~mine["module"].astype(str).str.startswith(OUTSIDE_ROW[:-1])]
        if in_graphs.empty or float(in_graphs["device_ms"].sum()) <= 0:
            continue
        mine = in_graphs
        depth = block_depth(mine)
        blocks = rollup(mine, depth)
        block, block_ms = str(blocks.index[0]), float(blocks.iloc[0])
        inside = mine[mine["module"].map(lambda p: str(p) == block or str(p).startswith(block + "."))]
        by_pass = inside.groupby("pass")["device_ms"].sum()
        passes = ", ".join(f"{p} {float(by_pass[p]) / total * 100:.0f}%" for p in ("forward", "backward") if p in by_pass)
        text = (f"{r['label']}: {block_ms / total * 100:.0f}% of its {dev} time a step ({ms_text(block_ms)}) is in "
                f"{block}" + (f" ({passes})" if passes else ""))
        layer = inside.groupby(["module", "class", "pass"])["device_ms"].sum().sort_values(ascending=False)
        if len(layer):
            (path, cls, pass_), ms = layer.index[0], float(layer.iloc[0])
            own = inside[(inside["module"] == path) & (inside["pass"] == pass_)].sort_values("device_ms")
            source = next((str(x) for x in own["source"] if isinstance(x, str)), None) if "source" in own else None
            text += (f"; its costliest layer, {path} ({cls}, {pass_}"
                     + (f", called at {source}" if source else "") + f"), takes {ms_text(ms)}, mostly "
                     f"{category_label(str(own.iloc[-1]['category']), dev)}")
            k = _costliest_kernel_of(kernels_of.get(r["job"]), path, pass_)
            if k is not None:
                text += f" (its costliest kernel: {_short(str(k['kernel']))})"
        placed = number(r.get("model_code_pct"))
        text += "." + (f" {placed:.0f}% of the kernel time inside compiled graphs is placed on the model's code"
                       if placed is not None else "")
        outside = number(r.get("outside_graphs_ms"))
        if outside:
            what = r.get("outside_graphs_what")
            text += f"; {ms_text(outside)} a step runs outside them" + (f": {what}" if isinstance(what, str) else "")
        breaks = number(r.get("graph_breaks"))
        if breaks:
            text += f"; the step has {breaks:.0f} graph break{'s' if breaks != 1 else ''}"
        text += "." if placed is not None or outside or breaks else ""
        out.append(Finding("where_in_model", r["label"], text, "#fig-modules",
                           {"block": block, "block_ms": block_ms, "block_share_pct": block_ms / total * 100,
                            "depth": depth, "model_code_pct": placed}))
    return out


def _typical_rows(rows: pd.DataFrame) -> pd.DataFrame | None:
    """The rows with each layer's typical time (its median profiled step's: one step
    preempted on a loaded host does not make a layer the costliest) as their time, where
    the record has it; None where it has not."""
    if "typical_ms" not in rows or rows["typical_ms"].isna().all():
        return None
    return rows.assign(device_ms=rows["typical_ms"].fillna(rows["device_ms"]))


def _short(name: str, width: int = 56) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _costliest_kernel_of(kernels: pd.DataFrame | None, path: str, pass_: str):
    """The job's costliest step kernel whose time goes to this layer and pass, or None."""
    if kernels is None or "model_modules" not in kernels:
        return None
    want = f"{path} ("
    hit = kernels[kernels["model_modules"].map(
        lambda m: isinstance(m, str) and any(x.startswith(want) and x.endswith(f", {pass_})") for x in m.split("; ")))]
    return None if hit.empty else hit.sort_values("device_ms").iloc[-1]


def module_pairs(jobs: pd.DataFrame, modules: pd.DataFrame) -> list[Finding]:
    """Per pair of jobs apart in one of PAIR_KEYS: the blocks (and pass) whose time moved
    most, at the depth where_in_model reads the first job at."""
    out = []
    rows_of = by_job(modules)
    words = {"autotune": "max-autotune", "cudagraphs": "CUDA graphs"}
    for p in one_key_pairs(jobs):
        if p.key not in PAIR_KEYS:
            continue
        a, b = rows_of.get(p.a["job"]), rows_of.get(p.b["job"])
        if a is None or b is None or a.empty or b.empty:
            continue
        depth = block_depth(a)

        def by_block(rows: pd.DataFrame) -> pd.Series:
            return rows.groupby([_blocks(rows, depth), rows["pass"]])["device_ms"].sum()

        moved = by_block(b).sub(by_block(a), fill_value=0.0)
        moved = moved[moved.abs() >= PAIR_MIN_MS].sort_values(key=lambda s: -s.abs())
        if moved.empty:
            continue
        parts = [f"{'saved' if ms < 0 else 'added'} {ms_text(abs(float(ms)))} a step in {block} {pass_}"
                 for (block, pass_), ms in moved.head(PAIR_BLOCKS_SAID).items()]
        total = float(b["device_ms"].sum() - a["device_ms"].sum())
        text = (f"{words[p.key]} on {p.a['label']}: " + "; ".join(parts)
                + f" (the step's kernel time {'down' if total < 0 else 'up'} {ms_text(abs(total))} in all).")
        out.append(Finding("module_pairs", p.a["label"], text, "#fig-modules",
                           {"key": p.key, "moved_ms": {f"{k[0]} {k[1]}": float(v) for k, v in moved.head(10).items()}}))
    return out


def modules_figure(jobs: pd.DataFrame, modules: pd.DataFrame, out_dir: Path):
    """Each job's FIGURE_MODULES costliest modules a step (layer and pass), bars split by
    kernel category; one panel a job, at most FIGURE_JOBS (the costliest steps)."""
    from sweeper.reporting import figures as fg

    title = "the costliest model modules a step"
    if modules.empty:
        return fg.Figure("modules", title, None, "no job recorded its time by model code (records from before it, or none finished)")
    ok = ok_jobs(jobs)
    ok = ok[ok["job"].isin(set(modules["job"]))]
    if ok.empty:
        return fg.Figure("modules", title, None, "no finished job recorded its time by model code")
    chosen = ok.sort_values("device_ms", ascending=False).head(FIGURE_JOBS)
    fig, axes = fg.plt.subplots(len(chosen), 1, squeeze=False,
                                figsize=(10, (0.26 * FIGURE_MODULES + 1.0) * len(chosen)))
    rows_of = by_job(modules)
    dev = fg.device_word(jobs)
    for ax, (_, job) in zip(axes[:, 0], chosen.iterrows()):
        mine = rows_of[job["job"]]
        per = mine.groupby(["module", "pass"])["device_ms"].sum().sort_values(ascending=False).head(FIGURE_MODULES)
        keys = list(per.index)[::-1]
        left = [0.0] * len(keys)
        for cat in [c for c in CATEGORIES if c in set(mine["category"])]:
            part = mine[mine["category"] == cat].groupby(["module", "pass"])["device_ms"].sum()
            vals = [float(part.get(k, 0.0)) for k in keys]
            if any(vals):
                ax.barh(range(len(keys)), vals, left=left, color=fg.COLORS.get(cat), label=category_label(cat, dev))
                left = [x + v for x, v in zip(left, vals)]
        ax.set_yticks(range(len(keys)), [f"{m or '(model)'} ({'fwd' if p == 'forward' else 'bwd'})" for m, p in keys],
                      fontsize=8)
        ax.set_xlabel("ms a step", fontsize=8)
        ax.set_title(f"{job['label']}: its {len(keys)} costliest model modules", fontsize=9)
        ax.legend(fontsize=8, loc="lower right")
    left_out = len(ok) - len(chosen)
    if left_out > 0:
        fig.suptitle(f"the {len(chosen)} jobs of the costliest steps; {left_out} more in tables/modules.csv", fontsize=9)
    fig.tight_layout()
    return fg.Figure("modules", title, fg._save(fig, out_dir, "modules"), None, tuple(chosen["label"]))
