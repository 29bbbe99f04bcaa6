"""What NVML's GPU utilization counts: loops of kernels of known length with known idle
gaps, each read by the profiler (union of kernel intervals over the loop's unprofiled
time, as the job's busy_pct) and by NVML (tasks/nvml_util.py, as the job's
nvml_util_pct). GPU only.

    python bench/nvml_probe.py [--seconds 3] > bench/results/busy/nvml_probe.md

The patterns hold the busy share near 20% and 50% while changing what a launch-bound
step changes: how many kernels run a second, and how many idle gaps lie between them.
If NVML's excess over the profiler grows with the kernels, NVML counts time per launch
that the profiler's kernel intervals leave out; if it grows with the idle gaps, NVML
rounds short gaps up to busy; if neither, it is the sampling.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.analysis import trace as tr  # noqa: E402
from tasks.nvml_util import utilization_during  # noqa: E402
from tasks.timing import steady_loop  # noqa: E402


def spin_us(us: float) -> None:
    """Hold the host for `us` microseconds (a sleep is far coarser)."""
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def pattern(cycles: int, burst: int, gap_us: float, between_us: float):
    """One iteration: `burst` kernels of `cycles` GPU clock cycles each, launched
    `between_us` apart by the host (0: back to back), then the host waits for them and
    holds `gap_us` with the GPU idle."""
    def one():
        for _ in range(burst):
            torch.cuda._sleep(cycles)
            if between_us:
                spin_us(between_us)
        torch.cuda.synchronize()
        spin_us(gap_us)
    return one


def measure(fn, seconds: float) -> dict:
    """busy % as the job computes it and NVML's %, for one pattern: NVML over a steady loop,
    the kernel intervals of profiled iterations over that loop's time an iteration."""
    loop, nvml = utilization_during(partial(steady_loop, fn, seconds, "cuda"))
    iter_ms = loop["step_ms"]
    runs = max(20, min(400, loop["steps"] // 10))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
    with tempfile.TemporaryDirectory() as tmp:  # the job's own path: Chrome trace -> kernel intervals
        prof.export_chrome_trace(f"{tmp}/t.json")
        kernels = tr.device_kernels(tr.load_trace(f"{tmp}/t.json"))
    union_ms = tr.union_us((k.start_us, k.end_us) for k in kernels) / 1000 / runs
    return {"iter_ms": iter_ms, "kernels_per_iter": len(kernels) / runs, "busy_pct": min(100.0, union_ms / iter_ms * 100),
            "nvml_pct": nvml.get("util_pct"), "nvml_samples": nvml.get("samples"), "period_ms": nvml.get("period_ms"),
            "nvml_reason": nvml.get("reason")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    args = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    # cycles for 1 µs at the clock the GPU runs under load (the H200 held 1980 MHz)
    mhz = 1980
    cases = [  # name, kernel µs, kernels a burst, idle gap µs after the burst, host µs between launches
        ("1 long kernel, 1 gap", 1000, 1, 4000, 0),
        ("10 kernels back to back, 1 gap", 100, 10, 4000, 0),
        ("100 kernels back to back, 1 gap", 10, 100, 4000, 0),
        ("100 kernels, a gap after each", 10, 100, 0, 40),
        ("1 long kernel, 1 gap (50%)", 2000, 1, 2000, 0),
        ("200 kernels back to back, 1 gap (50%)", 10, 200, 2000, 0),
        ("200 kernels, a gap after each (50%)", 10, 200, 0, 10),
    ]
    print(f"# NVML utilization against the profiler's busy figure\n\nGPU {props.name}, torch {torch.__version__}, "
          f"{args.seconds:g} s a reading; kernels are `torch.cuda._sleep` of the cycles of N µs at {mhz} MHz.\n")
    print("| pattern | kernels / s | idle gaps / s | busy % (profiler) | NVML % | NVML − busy, points "
          "| excess µs per kernel | excess µs per gap | NVML samples (period ms) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, k_us, burst, gap_us, between_us in cases:
        r = measure(pattern(int(k_us * mhz), burst, gap_us, between_us), args.seconds)
        per_s = 1000 / r["iter_ms"]
        kernels_s = r["kernels_per_iter"] * per_s
        gaps_s = per_s * (burst if between_us else 1)
        if r["nvml_pct"] is None:
            print(f"| {name} | {kernels_s:.0f} | {gaps_s:.0f} | {r['busy_pct']:.1f} | – ({r['nvml_reason']}) | | | | |")
            continue
        excess = r["nvml_pct"] - r["busy_pct"]
        excess_s = excess / 100  # seconds of NVML-busy a second beyond the kernel intervals
        print(f"| {name} | {kernels_s:.0f} | {gaps_s:.0f} | {r['busy_pct']:.1f} | {r['nvml_pct']:.1f} | {excess:+.1f} "
              f"| {excess_s / kernels_s * 1e6:+.2f} | {excess_s / gaps_s * 1e6:+.2f} "
              f"| {r['nvml_samples']} ({r['period_ms']}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
