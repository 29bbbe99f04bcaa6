"""NVML's utilization against what the busy figure and the kernel launches predict, on the
committed H200 records (tests/fixtures/h200: the example grid, the busy run, the builds
run):

    python bench/nvml_expected.py > bench/results/busy/nvml_expected.md

Expected: busy_pct + kernel launches per step x 1 µs / step time, at most 100
(sweeper/analysis/breakdown.nvml_expected_pct). Also fits the µs per launch that
matches best over the jobs without CUDA graphs (least squares).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from sweeper.analysis.breakdown import nvml_expected_pct  # noqa: E402
from sweeper.record import read_record  # noqa: E402
from sweeper.reporting.tables import record_label  # noqa: E402

FIX = ROOT / "tests" / "fixtures" / "h200"


def main() -> int:
    rows = []
    for folder in ("example", "busy", "builds"):
        for path in sorted((FIX / folder).glob("*.result.json.gz")):
            rec = read_record(path)
            step, nvml = rec["step"], rec["timings"]["nvml"]["util_pct"]
            rows.append({"job": f"{folder}/{path.name.split('.')[0]}: {record_label(rec)}",
                         "graphs": rec["config"]["cudagraphs"], "busy": step["busy_pct"], "nvml": nvml,
                         "launches": step["kernel_launches"], "step_ms": step["busy_wall_ms"],
                         "expected": nvml_expected_pct(step["busy_pct"], step["kernel_launches"],
                                                       step["busy_wall_ms"])})
    print("| job | busy % | NVML % | NVML − busy | launches / step | step ms (loop) | expected % | NVML − expected |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['job']} | {r['busy']:.1f} | {r['nvml']:.1f} | {r['nvml'] - r['busy']:+.1f} | {r['launches']:.0f} "
              f"| {r['step_ms']:.3f} | {r['expected']:.1f} | {r['nvml'] - r['expected']:+.1f} |")
    gaps = [abs(r["nvml"] - r["busy"]) for r in rows]
    misses = [abs(r["nvml"] - r["expected"]) for r in rows]
    plain = [r for r in rows if not r["graphs"]]
    x = [r["launches"] / r["step_ms"] / 10 for r in plain]  # points per µs a launch
    y = [r["nvml"] - r["busy"] for r in plain]
    fit = sum(a * b for a, b in zip(x, y)) / sum(a * a for a in x)
    print(f"\n{len(rows)} jobs. NVML − busy: up to {max(gaps):.1f} points, {sum(g > 7 for g in gaps)} beyond 7. "
          f"NVML − expected: up to {max(misses):.1f} points; without CUDA graphs up to "
          f"{max(abs(r['nvml'] - r['expected']) for r in plain):.1f} ({len(plain)} jobs). Best fit over those: "
          f"{fit:.2f} µs a launch.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
