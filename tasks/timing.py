"""Timing on the job's device: CUDA events on a GPU, perf_counter on a CPU."""

from __future__ import annotations

import time
from typing import Callable

import torch

from tasks.gc_watch import paused


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_calls(fn: Callable[[], object], n: int, device: str, calls_per_sample: int = 1) -> list[float]:
    """`n` samples of the mean milliseconds of one call, each sample `calls_per_sample`
    back-to-back calls. On a GPU the events sit in the stream, so a sample is the time
    from its first launch to its last kernel's end: the steady-state time whether the
    step is bound by the GPU or by the host launching work."""
    samples = []
    with paused():  # no garbage collection of the compiler's heap inside a sample
        if device == "cuda":
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
            synchronize(device)
            for start, end in events:
                start.record()
                for _ in range(calls_per_sample):
                    fn()
                end.record()
            torch.cuda.synchronize()
            samples = [s.elapsed_time(e) / calls_per_sample for s, e in events]
        else:
            for _ in range(n):
                t0 = time.perf_counter()
                for _ in range(calls_per_sample):
                    fn()
                samples.append((time.perf_counter() - t0) * 1000 / calls_per_sample)
    return samples


def time_calls_synced(fn: Callable[[], object], n: int, device: str, calls_per_sample: int = 1) -> list[float]:
    """`n` samples of the mean milliseconds of one call, waiting for the device after every
    call: the method of PyTorch's own harness (torch._inductor.utils.timed, which
    `python <module>.py -p` divides its kernel time by). Each call then pays its host-side
    launch time with the device idle, so a launch-bound module reads slower, and less
    busy, than in time_calls()."""
    samples = []
    with paused():
        for _ in range(n):
            synchronize(device)
            t0 = time.perf_counter()
            for _ in range(calls_per_sample):
                fn()
                synchronize(device)
            samples.append((time.perf_counter() - t0) * 1000 / calls_per_sample)
    return samples


def time_until_steady(fn: Callable[[], object], device: str, calls_per_sample: int, min_samples: int,
                      max_samples: int, steady_pct: float,
                      probe: Callable[[], float] | None = None) -> tuple[list[float], list[float]]:
    """time_calls_synced() samples, at least `min_samples` and then one more at a time until
    they are steady (sweeper.breakdown.steady) or `max_samples` are taken: a module whose
    rounds agree stops early, a noisy one gets every round. With a `probe` (launch_probe_us),
    it is read just before each sample. Returns the samples and the probe's readings
    (empty without a probe), pair by pair."""
    from sweeper.breakdown import steady

    samples: list[float] = []
    readings: list[float] = []
    while len(samples) < max_samples and (len(samples) < min_samples or not steady(samples, steady_pct)):
        if probe is not None:
            readings.append(probe())
        samples += time_calls_synced(fn, 1, device, calls_per_sample)
    return samples, readings


# A probe's launches: a few milliseconds of host time, so that one reading per timed round
# costs little beside the round itself.
PROBE_LAUNCHES = 500


def launch_probe_us(device: str, launches: int = PROBE_LAUNCHES) -> float:
    """Microseconds per launch of a one-element in-place add, `launches` back to back and
    one wait at the end: how fast the host launches work at this moment. Why: a
    launch-bound module's wall time follows the host's launch speed, and on the H200 VM
    that speed held a level for about a job and changed between jobs a minute apart
    (docs/gpu.md, session 6). A reading beside each timed round tells a slow host from a
    slow module. The op's own device time (a few microseconds on a GPU) stays below its
    launch cost, so the reading is the host's; on a CPU it is the cost of dispatching the
    op."""
    import torch

    x = torch.zeros(1, device=device)
    with paused():
        synchronize(device)
        t0 = time.perf_counter()
        for _ in range(launches):
            x.add_(1.0)
        synchronize(device)
        return (time.perf_counter() - t0) * 1e6 / launches


def peak_memory_reset(device: str) -> None:
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_memory_mb(device: str) -> float | None:
    """Peak allocated device memory since the last reset (None on a CPU: the process's
    resident peak includes the compiler and says little about the model)."""
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return None
