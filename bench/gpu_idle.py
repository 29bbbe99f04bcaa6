"""How much of a sweep the GPU sat idle, from nvidia-smi's utilization read once a second
while it ran (bench/gpu_run.sh packing writes one CSV a sweep: timestamp, utilization %,
memory used MiB):

    python bench/gpu_idle.py /tmp/gpu/smi_*.csv

Idle: a reading of 0% (no kernel ran in NVML's sample period). One GPU a file: the
packing runs use one.
"""

from __future__ import annotations

import sys
from pathlib import Path


def readings(path: Path) -> list[tuple[float, float]]:
    """(utilization %, memory used MiB) of each reading; lines nvidia-smi could not fill are skipped."""
    out = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3:
            continue
        try:
            out.append((float(parts[1]), float(parts[2])))
        except ValueError:
            continue
    return out


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    print("| sweep | readings (s) | GPU idle (0%) | mean utilization | peak memory used |")
    print("|---|---|---|---|---|")
    for p in map(Path, paths):
        got = readings(p)
        if not got:
            print(f"| {p.stem.removeprefix('smi_')} | 0 | - | - | - |")
            continue
        idle = sum(1 for u, _ in got if u == 0) / len(got)
        mean = sum(u for u, _ in got) / len(got)
        print(f"| {p.stem.removeprefix('smi_')} | {len(got)} | {100 * idle:.0f}% | {mean:.0f}% "
              f"| {max(m for _, m in got) / 1024:.1f} GiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
