"""A sweep's roofline as Markdown: each job's roofs and step against them (known work, bound,
left to win), the sweep's 15 launch sites with the most to win, and the library kernels'
efficiency by kind (how far cuDNN and cuBLAS run from the measured peaks).

    python bench/roofline_check.py SWEEP_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    from sweeper.reporting.load import read_sweep
    from sweeper.reporting.roofline import _kind, ranking

    sweep = read_sweep(Path(sys.argv[1]))
    jobs = sweep.jobs[sweep.jobs["status"] == "ok"]
    print("| job | copy GB/s | matmul TFLOP/s | step kernel ms | work known % | bound ms | left to win ms |")
    print("|---|---|---|---|---|---|---|")
    for _, j in jobs.iterrows():
        print(f"| {j['label']} | {j['copy_gbps'] or 0:.0f} | {j['matmul_tflops']} | {j['device_ms']:.2f} | "
              f"{j['roofline_known_pct'] or 0:.1f} | {j['bound_ms'] or 0:.2f} | {j['recoverable_ms'] or 0:.2f} |")
    top = ranking(sweep.recoverable, 15)
    print("\n## The 15 launch sites with the most to win\n")
    print("| job | kernel | model code | ms | bound ms | by | % of roof speed | TFLOP/s | GB/s | to win ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for _, r in top.iterrows():
        ms = r["typical_ms"] if "typical_ms" in r and r["typical_ms"] == r["typical_ms"] else r["device_ms"]  # NaN: before it
        print(f"| {r['label']} | `{str(r['kernel'])[:60]}` ({r['kernels']}) | {r['module']} | {ms:.3f} | "
              f"{r['bound_ms']:.3f} | {r['bound_by']} {r['dtype'] or ''} | {r['efficiency_pct']:.0f} | "
              f"{r['tflops_per_s'] or 0:.1f} | {r['gb_per_s'] or 0:.0f} | {r['recoverable_ms']:.3f} |")
    rows = sweep.recoverable.dropna(subset=["bound_ms"])
    if len(rows):
        rows = rows.assign(kind=[_kind(r) for _, r in rows.iterrows()])
        print("\n## Efficiency by kind (the rows each job keeps: its 100 sites with the most to win)\n")
        print("| job | kind | sites | ms | bound ms | % of roof speed (time-weighted) | % of roof speed, median site |")
        print("|---|---|---|---|---|---|---|")
        for (label, kind), g in rows.groupby(["label", "kind"]):
            print(f"| {label} | {kind} | {len(g)} | {g['device_ms'].sum():.2f} | {g['bound_ms'].sum():.2f} | "
                  f"{100 * g['bound_ms'].sum() / g['device_ms'].sum():.0f} | {g['efficiency_pct'].median():.0f} |")


if __name__ == "__main__":
    main()
