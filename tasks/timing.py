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
                      max_samples: int, steady_pct: float) -> list[float]:
    """time_calls_synced() samples, at least `min_samples` and then one more at a time until
    they are steady (sweeper.breakdown.steady) or `max_samples` are taken: a module whose
    rounds agree stops early, a noisy one gets every round."""
    from sweeper.breakdown import steady

    samples = time_calls_synced(fn, min(min_samples, max_samples), device, calls_per_sample)
    while len(samples) < max_samples and not steady(samples, steady_pct):
        samples += time_calls_synced(fn, 1, device, calls_per_sample)
    return samples


def peak_memory_reset(device: str) -> None:
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_memory_mb(device: str) -> float | None:
    """Peak allocated device memory since the last reset (None on a CPU: the process's
    resident peak includes the compiler and says little about the model)."""
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return None
