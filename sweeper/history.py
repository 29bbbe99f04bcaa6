"""Sweeps over time: compare one sweep with another, and trends over the last N.

    python -m sweeper.history compare NEW_SWEEP [OLD_SWEEP] [--threshold 5]
    python -m sweeper.history trend OUTPUTS_DIR [--last 10]

The history is the sweep folders under an outputs folder (any folder with a summary.json),
ordered by when they started; their tables/jobs.parquet are read where they are (made by
the aggregation when missing). Jobs are matched across sweeps by their configuration
(`key` in tables.JOB_COLUMNS), not by job number. Without OLD_SWEEP, `compare` takes the
sweep before NEW_SWEEP in NEW_SWEEP's parent folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from sweeper.aggregate import aggregate
from sweeper.reporting.load import AggregateError
from sweeper.reporting.tables import JOB_SHARE_PREFIX

# The PyTorch benchmark dashboard flags a 5% change in a model's time.
DEFAULT_THRESHOLD_PCT = 5.0


def sweeps_under(outputs: Path) -> list[Path]:
    """Sweep folders under `outputs`, oldest first (by summary.json's started_at)."""
    found = []
    for s in Path(outputs).rglob("summary.json"):
        try:
            started = json.loads(s.read_text()).get("started_at") or ""
        except (OSError, ValueError):
            continue
        found.append((started, str(s.parent), s.parent))
    return [p for _, _, p in sorted(found)]


def jobs_of(sweep: Path) -> pd.DataFrame:
    table = Path(sweep) / "tables" / "jobs.parquet"
    if not table.exists():
        aggregate(sweep)
    return pd.read_parquet(table)


def compare(old: pd.DataFrame, new: pd.DataFrame, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> pd.DataFrame:
    """Per job key: step time change (%), busy change (points), the largest category share
    change (points), and `flag` where a change passes the threshold. Jobs only in one
    sweep, or not ok in one of them, are listed with their status and no change."""
    shares = [c for c in new.columns if c.startswith(JOB_SHARE_PREFIX)]
    cols = ["key", "label", "status", "compiled_step_ms", "busy_pct", *shares]

    def one_per_key(t: pd.DataFrame) -> pd.DataFrame:
        # jobs of one configuration (seeds): the first that finished ok stands for it
        return t.assign(_ok=t["status"] != "ok").sort_values(["_ok", "job"]).drop_duplicates("key")[cols]

    merged = one_per_key(old).merge(one_per_key(new), on="key", how="outer", suffixes=("_old", "_new"))
    merged["label"] = merged["label_new"].fillna(merged["label_old"])
    merged["step_change_pct"] = (merged["compiled_step_ms_new"] / merged["compiled_step_ms_old"] - 1) * 100
    merged["busy_change_pp"] = merged["busy_pct_new"] - merged["busy_pct_old"]
    diffs = pd.DataFrame({c[len(JOB_SHARE_PREFIX):]: merged[c + "_new"] - merged[c + "_old"] for c in shares})
    comparable = diffs.notna().any(axis=1) & (diffs.abs().max(axis=1) > 0)
    biggest = diffs.fillna(0).abs().idxmax(axis=1).where(comparable)
    merged["largest_share_change"] = biggest
    merged["largest_share_change_pp"] = [diffs.at[i, c] if isinstance(c, str) else float("nan")
                                         for i, c in biggest.items()]

    def flag(r) -> str:
        if pd.isna(r["status_old"]):
            return "new job"
        if pd.isna(r["status_new"]):
            return "gone"
        if r["status_old"] != r["status_new"]:
            return f"status {r['status_old']} -> {r['status_new']}"
        out = []
        if abs(r["step_change_pct"]) >= threshold_pct:
            out.append("slower" if r["step_change_pct"] > 0 else "faster")
        if abs(r["busy_change_pp"]) >= threshold_pct:
            out.append("busy changed")
        if abs(r["largest_share_change_pp"]) >= threshold_pct:
            out.append("category shift")
        return ", ".join(out)

    merged["flag"] = merged.apply(flag, axis=1)
    keep = ["key", "label", "status_old", "status_new", "compiled_step_ms_old", "compiled_step_ms_new",
            "step_change_pct", "busy_pct_old", "busy_pct_new", "busy_change_pp", "largest_share_change",
            "largest_share_change_pp", "flag"]
    return merged[keep].sort_values("label").reset_index(drop=True)


def _fmt(x, f="{:+.1f}") -> str:
    return "–" if pd.isna(x) else f.format(x)


def compare_text(table: pd.DataFrame, old: Path, new: Path, threshold_pct: float) -> str:
    lines = [f"# {new} against {old} (flags at {threshold_pct:g}%)", "",
             "| job | step ms old | step ms new | change % | busy % old | busy % new | change pp "
             "| largest share change | flag |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        lines.append(f"| {r['label']} | {_fmt(r['compiled_step_ms_old'], '{:.2f}')} | "
                     f"{_fmt(r['compiled_step_ms_new'], '{:.2f}')} | {_fmt(r['step_change_pct'])} | "
                     f"{_fmt(r['busy_pct_old'], '{:.1f}')} | {_fmt(r['busy_pct_new'], '{:.1f}')} | "
                     f"{_fmt(r['busy_change_pp'])} | {r['largest_share_change'] if isinstance(r['largest_share_change'], str) else '–'} "
                     f"{_fmt(r['largest_share_change_pp'])} | {r['flag'] or ''} |")
    flagged = int((table["flag"] != "").sum())
    lines += ["", f"{flagged} of {len(table)} jobs flagged."]
    return "\n".join(lines)


def trend_figure(sweeps: list[Path], out: Path) -> tuple[Path, pd.DataFrame]:
    from sweeper.reporting.figures import plt, save  # matplotlib, set up for files only

    rows = []
    for i, s in enumerate(sweeps):
        t = jobs_of(s)
        t = t[t["status"] == "ok"]
        rows += [{"sweep": s.name, "order": i, "label": r["label"], "compiled_step_ms": r["compiled_step_ms"]}
                 for _, r in t.iterrows()]
    data = pd.DataFrame(rows, columns=["sweep", "order", "label", "compiled_step_ms"])
    fig, ax = plt.subplots(figsize=(10, 5))
    for label, g in data.groupby("label"):
        ax.plot(g["order"], g["compiled_step_ms"], marker="o", label=label)
    ax.set_xticks(range(len(sweeps)), [s.name for s in sweeps], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("compiled step (ms)")
    ax.set_title(f"compiled step time over the last {len(sweeps)} sweeps")
    if len(data):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return save(fig, out), data


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweeper.history", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("new", type=Path)
    c.add_argument("old", type=Path, nargs="?")
    c.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT)
    t = sub.add_parser("trend")
    t.add_argument("outputs", type=Path)
    t.add_argument("--last", type=int, default=10)
    t.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "compare":
            new = args.new.resolve()
            old = args.old
            if old is None:
                order = [p.resolve() for p in sweeps_under(new.parent)]
                before = order[: order.index(new)] if new in order else [p for p in order if p != new]
                if not before:
                    print(f"sweeper.history: no earlier sweep beside {new}; name one: compare NEW OLD", file=sys.stderr)
                    return 2
                old = before[-1]
            table = compare(jobs_of(old), jobs_of(new), args.threshold)
            print(compare_text(table, old, new, args.threshold))
            table.to_csv(new / f"compare_{Path(old).name}.csv", index=False)
        else:
            sweeps = sweeps_under(args.outputs)[-args.last:]
            if not sweeps:
                print(f"sweeper.history: no sweep folder (with summary.json) under {args.outputs}", file=sys.stderr)
                return 2
            out, _ = trend_figure(sweeps, args.out or args.outputs / "trend.png")
            print(f"trend of {len(sweeps)} sweeps: {out}")
    except AggregateError as e:
        print(f"sweeper.history: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
