"""Does the host's launch speed depend on the CPU core that launches? On the H200 VM the
launch speed (tasks/timing.launch_probe_us) switched between levels, with stretches
about 30% faster inside one job (bench/results/launch_speed/). If the level follows the core the scheduler put the
thread on, pinning the timing to one core would make launch-bound figures steady.

    python bench/core_probe.py [--seconds 40] > core_probe.md

Three parts, on one GPU (or the CPU without one):
1. pinned: the calling thread pinned to each allowed core in turn, twice (cores in order,
   then reversed, so that a drift in time does not pass for a difference between cores),
   8 probe readings per visit.
2. unpinned: for --seconds, a probe reading every ~0.2 s with the core the thread ran on
   before and after it (/proc/thread-self/stat) and the host's steal time (/proc/stat):
   do slow stretches follow a core change or time stolen by the hypervisor?
3. the GPU's local cores (/sys/bus/pci/devices/<pci>/local_cpulist) and lscpu's sibling
   map, to read the per-core figures against.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402

from tasks.timing import launch_probe_us  # noqa: E402


def current_cpu() -> int:
    """The core this thread last ran on (field 39 of /proc/thread-self/stat)."""
    stat = Path("/proc/thread-self/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[36])


def steal_ticks() -> int:
    """The whole host's stolen ticks so far (the 'cpu' line of /proc/stat, 8th value)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()
    return int(fields[8]) if len(fields) > 8 else 0


def gpu_local_cpus() -> str:
    if not torch.cuda.is_available():
        return "(no GPU)"
    p = torch.cuda.get_device_properties(0)
    bus = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    path = Path(f"/sys/bus/pci/devices/{bus}/local_cpulist")
    return f"{bus}: {path.read_text().strip()}" if path.exists() else f"{bus}: (no {path})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=40.0)
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    allowed = sorted(os.sched_getaffinity(0))
    for _ in range(5):
        launch_probe_us(device)  # CUDA context, first launches

    print(f"# Launch probe per core ({device}, {len(allowed)} allowed cores)\n")
    print(f"GPU local cores: {gpu_local_cpus()}\n")
    per_core: dict[int, list[float]] = {c: [] for c in allowed}
    for order in (allowed, allowed[::-1]):
        for cpu in order:
            os.sched_setaffinity(0, {cpu})
            launch_probe_us(device)
            per_core[cpu] += [launch_probe_us(device) for _ in range(8)]
    os.sched_setaffinity(0, set(allowed))
    print("## 1. Pinned: µs per launch (two visits of 8 readings each)\n")
    print("| core | visit 1 median | visit 2 median | min | max |")
    print("|---:|---:|---:|---:|---:|")
    for cpu in allowed:
        r = per_core[cpu]
        print(f"| {cpu} | {statistics.median(r[:8]):.2f} | {statistics.median(r[8:]):.2f} | {min(r):.2f} | {max(r):.2f} |")
    medians = [statistics.median(r) for r in per_core.values()]
    print(f"\nCore medians: {min(medians):.2f} to {max(medians):.2f} µs "
          f"(median {statistics.median(medians):.2f}).\n")

    print(f"## 2. Unpinned for {args.seconds:.0f} s, from {time.strftime('%H:%M:%S')}\n")
    rows = []
    t_end = time.time() + args.seconds
    t0 = time.time()
    while time.time() < t_end:
        before, steal0 = current_cpu(), steal_ticks()
        us = launch_probe_us(device)
        rows.append((time.time() - t0, before, current_cpu(), us, steal_ticks() - steal0))
        time.sleep(0.2)
    by_cpu: dict[int, list[float]] = {}
    for _, before, after, us, _ in rows:
        if before == after:
            by_cpu.setdefault(before, []).append(us)
    print("| core (no move in the reading) | readings | median µs | min | max |")
    print("|---:|---:|---:|---:|---:|")
    for cpu, r in sorted(by_cpu.items()):
        print(f"| {cpu} | {len(r)} | {statistics.median(r):.2f} | {min(r):.2f} | {max(r):.2f} |")
    moved = sum(1 for r in rows if r[1] != r[2])
    stolen = sum(r[4] for r in rows)
    print(f"\n{len(rows)} readings, {moved} moved core within the reading; "
          f"{stolen} ticks stolen from the host during readings.\n")
    print("Every reading (s, core before, core after, µs, stolen ticks):\n")
    print("```")
    for t, before, after, us, st in rows:
        print(f"{t:6.2f} {before:3d} {after:3d} {us:7.2f} {st}")
    print("```")


if __name__ == "__main__":
    main()
