"""Does the host's launch speed explain a launch-bound module's wall time? Reads repeated
jobs of one configuration and sets each module's timed rounds (`modules[].wall_ms`)
beside the launch-probe reading taken just before each (`modules[].launch_us`,
tasks/timing.launch_probe_us).

    python bench/launch_probe.py JOB_DIR [JOB_DIR ...] > launch_probe.md

JOB_DIR is a job folder holding result.json, or a record saved as NAME.result.json.gz
(as under bench/results/). Prints, per module: each
job's rounds as probe µs / wall ms, the correlation of the two over all rounds, and the
spread across jobs of three per-job figures: the median wall time, the fastest round, and
the median of wall time scaled to a 10 µs launch (wall × 10 / probe, as if the whole call
moved with the host's launch speed). If the probe explains the drift, the scaled figure
varies least.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.record import read_record  # noqa: E402


def _load(arg: str) -> tuple[str, dict]:
    """(a short name, the record) from a job folder or a saved NAME.result.json.gz."""
    path = Path(arg)
    return (path.name.split(".")[0] if path.suffix == ".gz" else arg), read_record(path)


def _range(values: list[float]) -> str:
    return (f"{min(values):.2f}–{max(values):.2f} ms, range "
            f"{100 * (max(values) - min(values)) / statistics.median(values):.0f}% of the median")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    records = [_load(a) for a in argv]
    labels = [m["label"] for m in records[0][1]["modules"]]
    for label in labels:
        print(f"## {label}\n\n| job | rounds: probe µs / wall ms |\n|---|---|")
        pairs, medians, fastest, scaled = [], [], [], []
        for name, rec in records:
            m = next((x for x in rec["modules"] if x["label"] == label), None)
            if not m or not m.get("launch_us") or not m.get("wall_ms"):
                print(f"| {name} | no probe readings (a record from before the probe) |")
                continue
            rounds = list(zip(m["launch_us"]["values"], m["wall_ms"]["values"]))
            pairs += rounds
            medians.append(statistics.median(w for _, w in rounds))
            fastest.append(min(w for _, w in rounds))
            scaled.append(statistics.median(w * 10 / p for p, w in rounds))
            print(f"| {name} | " + " ".join(f"{p:.1f}/{w:.2f}" for p, w in rounds) + " |")
        if len(pairs) < 3 or len(medians) < 2:
            print("\nToo few rounds or jobs to compare.\n")
            continue
        corr = statistics.correlation([p for p, _ in pairs], [w for _, w in pairs])
        print(f"\nCorrelation of probe and wall time over {len(pairs)} rounds: {corr:.2f}.\n"
              f"Across {len(medians)} jobs: median wall {_range(medians)}; fastest round "
              f"{_range(fastest)}; wall scaled to a 10 µs launch {_range(scaled)}.\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
