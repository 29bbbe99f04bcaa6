"""How long must a timing last to average out the host's switching launch speed? Reads
the unpinned readings of bench/core_probe.py outputs (one probe every ~0.2 s) and prints,
for windows of 2, 4, 8 and 15 s (half-overlapping), the range over windows of the mean
and of the median reading, and the lengths of the fast and slow stretches.

    python bench/launch_windows.py core_probe_1.md [core_probe_2.md ...] > launch_windows.md

A `-p` run times its module over about 2 s; sweeper's module rounds span
measure.module_span_s (8 s by default). A window whose figure varies less from window to
window gives steadier jobs on such a host.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

FAST_BELOW_US = 8.2  # between the two levels seen on the H200 (about 7 and 10 µs)
WINDOWS_S = (2, 4, 8, 15)


def readings(path: Path) -> list[tuple[float, float]]:
    """(seconds from the start, µs) of each unpinned reading in a core_probe.py output."""
    block = path.read_text().split("```")[1]
    rows = [line.split() for line in block.strip().splitlines()]
    return [(float(r[0]), float(r[3])) for r in rows]


def stretches(series: list[tuple[float, float]]) -> list[tuple[bool, float]]:
    """(fast?, seconds) of each run of readings on one side of FAST_BELOW_US."""
    out: list[tuple[bool, float]] = []
    state, start = series[0][1] < FAST_BELOW_US, series[0][0]
    for t, us in series:
        if (us < FAST_BELOW_US) != state:
            out.append((state, t - start))
            state, start = not state, t
    out.append((state, series[-1][0] - start))
    return out


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    for p in paths:
        series = readings(Path(p))
        fast = sum(us < FAST_BELOW_US for _, us in series) / len(series)
        runs = stretches(series)
        print(f"## {Path(p).name}: {len(series)} readings over {series[-1][0]:.0f} s, "
              f"{fast:.0%} below {FAST_BELOW_US} µs\n")
        lengths = sorted(d for _, d in runs)
        print(f"{len(runs)} stretches, {lengths[0]:.1f} to {lengths[-1]:.1f} s long (median {statistics.median(lengths):.1f} s; "
              "the last, cut off by the end, can read 0 s)\n")
        print("| window s | windows | mean µs: min–max | median µs: min–max |")
        print("|---:|---:|---|---|")
        for w in WINDOWS_S:
            means, medians, start = [], [], 0.0
            while start + w <= series[-1][0]:
                inside = [us for t, us in series if start <= t < start + w]
                means.append(statistics.fmean(inside))
                medians.append(statistics.median(inside))
                start += w / 2
            if means:
                print(f"| {w} | {len(means)} | {min(means):.2f}–{max(means):.2f} | {min(medians):.2f}–{max(medians):.2f} |")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
