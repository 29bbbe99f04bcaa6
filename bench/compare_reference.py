"""Compare sweeper's per-module breakdowns with the `-p` harness runs saved by
bench/run_reference.py, and sweeper's own steadiness over repeated jobs.

    python bench/compare_reference.py JOB_DIR [--repeat JOB_DIR ...] ... > report.md

Arguments: groups "JOB_DIR[,REPEAT_DIR,...]": the first dir holds the reference runs;
the others are repeats of the same job (same config), for sweeper's own spread.
Criteria (docs/method.md): each category's share of device time within 1.5 points of the
reference's; the reference-style busy percentage within the range of the reference's
runs or 2 points of their median.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.analysis.breakdown import wall_figure  # noqa: E402
from sweeper.record import ran_config, read_record  # noqa: E402
from sweeper.analysis.reference import compare, parse_tabulate  # noqa: E402

SHORT = {"triton_pointwise": "poi", "triton_reduction": "red", "triton_persistent_reduction": "per",
         "triton_unknown": "tri?", "unknown": "other"}


def _fmt(x: float) -> str:
    return f"{x:.2f}"


def _launch(values: list) -> str:
    """Launch-probe readings (tasks/timing.launch_probe_us), '–' where none was taken
    (runs and records from before the probe)."""
    return ", ".join("–" if v is None else _fmt(v) for v in values)


def compare_group(dirs: list[Path]) -> tuple[list[str], list[dict]]:
    main = read_record(dirs[0])
    repeats = [read_record(d) for d in dirs[1:]]
    cfg = ran_config(main)
    lines, results = [], []
    for m in main["modules"]:
        ref_files = sorted((dirs[0] / "reference").glob(f"{m['label']}_run*.txt"))
        runs = []
        for f in ref_files:
            try:
                runs.append(parse_tabulate(f.read_text()))
            except ValueError as e:
                lines.append(f"| {cfg['model']} b{cfg['batch_size']} | {m['label']} | reference run {f.name} failed: {e} |")
        if not runs or not m.get("breakdown"):
            continue
        c = compare(m["breakdown"], runs)
        same = [m] + [r2 for rec in repeats for r2 in rec["modules"] if r2["label"] == m["label"]]
        ours_busy = [x["breakdown"]["busy_pct_reference_style"] for x in same if x.get("breakdown")]
        ours_wall = [wall_figure(x["wall_ms"]) for x in same if x.get("wall_ms")]
        ours_union = [x["breakdown"]["busy_pct"] for x in same if x.get("breakdown")]
        # the host's launch speed: after each -p run, and over each job's rounds
        ref_launch = [r.launch_us for r in runs]
        ours_launch = [(x.get("launch_us") or {}).get("median") for x in same]
        share_cells = " ".join(
            f"{SHORT[k]} {_fmt(v['sweeper'])}/{_fmt(v['reference'])} ({v['diff_pp']:+.2f})"
            for k, v in c["shares"].items() if v["sweeper"] or v["reference"])
        lines.append(
            f"| {cfg['model']} b{cfg['batch_size']} | {m['label']} | {share_cells} | "
            f"{', '.join(_fmt(b) for b in c['busy']['reference_runs'])} | "
            f"{', '.join(_fmt(b) for b in ours_busy)} | "
            f"{', '.join(_fmt(w) for w in c['reference_wall_ms'])} | "
            f"{', '.join(_fmt(w) for w in ours_wall)} (in-run spread {m['wall_ms']['range_pct']:.1f}%"
            f"{'; pipelined ' + _fmt(m['wall_ms_pipelined']['median']) if m.get('wall_ms_pipelined') else ''}) | "
            f"{', '.join(_fmt(u) for u in ours_union)} | {_launch(ref_launch)} | {_launch(ours_launch)} | "
            f"{'yes' if c['ok'] else 'NO'} |")
        results.append({"job": str(dirs[0]), "module": m["label"], "comparison": c,
                        "sweeper_busy_ref_style_repeats": ours_busy, "sweeper_wall_ms_repeats": ours_wall,
                        "sweeper_busy_union_repeats": ours_union, "reference_launch_us": ref_launch,
                        "sweeper_launch_us_repeats": ours_launch})
    return lines, results


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    print("| job | module | share of device time, sweeper/reference (diff, pp) | reference busy % (its runs) "
          "| sweeper busy % ref-style (repeats) | reference wall ms | sweeper wall ms (repeats) "
          "| sweeper busy % union | reference launch µs (after each run) | sweeper launch µs (repeats) "
          "| within criteria |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    everything = []
    for group in argv:
        if group.startswith("--json="):
            continue
        lines, results = compare_group([Path(p) for p in group.split(",")])
        print("\n".join(lines))
        everything += results
    for a in argv:
        if a.startswith("--json="):
            Path(a[7:]).write_text(json.dumps(everything, indent=1))
    spreads = [(max(r["comparison"]["busy"]["reference_runs"]) - min(r["comparison"]["busy"]["reference_runs"]),
                max(r["sweeper_busy_ref_style_repeats"]) - min(r["sweeper_busy_ref_style_repeats"]))
               for r in everything]
    if spreads:
        print(f"\nBusy-percentage spread (max - min, points), median over modules: reference "
              f"{statistics.median(s[0] for s in spreads):.2f}, sweeper {statistics.median(s[1] for s in spreads):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
