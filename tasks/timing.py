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


# The rounds of the measurement rounds_in_turn is taking, for the job's heartbeat
# (tasks/phases_compile.heartbeat_line): a long phase says what it has done and what is left.
ROUNDS: dict = {}


def rounds_progress() -> str:
    """"rounds 7 and 3 of at least 5 each, 6 of 8 s" while rounds_in_turn runs, else ""."""
    if not ROUNDS:
        return ""
    counts = [len(v) for v in ROUNDS["taken"].values()]
    done = ", ".join(f"{n}" for n in counts)
    elapsed = ROUNDS["clock"]() - ROUNDS["t0"]
    return (f"rounds taken {done} ({', '.join(ROUNDS['taken'])}), each to take at least {ROUNDS['min']} and "
            f"{ROUNDS['span_s']:g} s in all (at most {ROUNDS['max']}); {min(elapsed, ROUNDS['span_s']):.0f} of "
            f"{ROUNDS['span_s']:g} s so far")


def rounds_in_turn(rounds: dict[str, Callable[[], object]], min_rounds: int, max_rounds: int, span_s: float,
                   clock: Callable[[], float] = time.perf_counter) -> tuple[dict[str, list], dict[str, Exception]]:
    """Take rounds of several measurements in turn (one round of each, then again) until
    `span_s` seconds have passed since the first and each has at least `min_rounds`, or a
    measurement has `max_rounds` (it stops; the others go on). A round that raises stops
    its measurement and no other. Returns each one's round results in the order taken,
    and the exception of each that failed.

    Why in turn and over a fixed span: on the H200 VM the host's launch speed switches
    between two levels (about 7 and 10 µs a launch) every 0.2 to 4 s, whatever core the
    thread is on (docs/findings.md). A module's rounds taken back to back
    in 2 s, or stopped as soon as they agree, saw one level: a snapshot, as one `-p` run
    is. Rounds interleaved across the modules and spread over several seconds sample both
    levels in their proportion, and the modules share those seconds rather than each
    paying its own."""
    taken: dict[str, list] = {name: [] for name in rounds}
    failed: dict[str, Exception] = {}
    t0 = clock()
    ROUNDS.clear()
    ROUNDS.update(taken=taken, min=min_rounds, max=max_rounds, span_s=span_s, t0=t0, clock=clock)

    def wants_more(name: str) -> bool:
        n = len(taken[name])
        return name not in failed and n < max_rounds and (n < min_rounds or clock() - t0 < span_s)

    while any(wants_more(name) for name in rounds):
        for name, one_round in rounds.items():
            if wants_more(name):
                try:
                    taken[name].append(one_round())
                except Exception as e:  # noqa: BLE001 - one module's failure is noted, not fatal
                    failed[name] = e
    ROUNDS.clear()
    return taken, failed


def steady_loop(fn: Callable[[], object], seconds: float, device: str,
                state: Callable[[], dict] | None = None) -> dict:
    """Call `fn` back to back (as time_calls does, no wait between calls) for `seconds`,
    after 3 calls to settle: the step's mean time over seconds rather than milliseconds.
    Why: the host's launch speed switches every 0.2 to 4 s on the H200 VM
    (docs/findings.md), so a launch-bound step's 20 timed steps are a snapshot of one level,
    where a few seconds average the levels; and NVML's utilization (tasks/nvml_util.py) is
    read over this very loop, so both busy instruments see the same seconds. Returns
    step_ms, steps, loop_s, start_us / end_us (wall clock, for NVML's timestamps), and
    chunk_step_ms: the mean step of each of LOOP_CHUNKS stretches of the loop (a wait for
    the device closes each; the stretches cover the whole loop, the last maybe shorter, so
    their means bracket step_ms), whose spread is the loop's own noise when two sweeps are
    compared (sweeper/analysis/regression.py). `state`: a reading of the GPU's clocks, power,
    temperature and clock event reasons (nvml_util.GpuStateReader), taken as each stretch
    ends, outside its time (and the loop's): the record's gpu_rounds, one a stretch."""
    with paused():  # a full collection of the compiler's heap stalled a loop for 1 s
        for _ in range(3):
            fn()
        synchronize(device)
        start_us, t0, steps = int(time.time() * 1e6), time.perf_counter(), 0
        chunk_s, chunks, chunk_t, chunk_steps = seconds / LOOP_CHUNKS, [], t0, 0
        readings, reading_s = [], 0.0
        while time.perf_counter() - (t0 + reading_s) < seconds or steps == 0:
            fn()
            steps += 1
            if time.perf_counter() - chunk_t >= chunk_s:
                synchronize(device)
                now = time.perf_counter()
                chunks.append((now - chunk_t) * 1000 / (steps - chunk_steps))
                if state is not None:
                    readings.append(state())
                    reading_s += time.perf_counter() - now
                chunk_t, chunk_steps = time.perf_counter(), steps
        synchronize(device)
        now, end_us = time.perf_counter(), int(time.time() * 1e6)
        # the stretch after the last full one is a stretch too: left out, a slow tail put
        # the loop's mean above every stretch's (a loaded 2-core CI machine)
        if steps > chunk_steps:
            chunks.append((now - chunk_t) * 1000 / (steps - chunk_steps))
            if state is not None:
                readings.append(state())
        loop_s = now - t0 - reading_s
    out = {"step_ms": loop_s * 1000 / steps, "steps": steps, "loop_s": round(loop_s, 3),
           "start_us": start_us, "end_us": end_us, "chunk_step_ms": [round(c, 5) for c in chunks]}
    if state is not None:
        out["gpu_rounds"] = readings
    return out


LOOP_CHUNKS = 8  # stretches of the steady loop timed apart (half a second each of 4 s)


def probed_round(fn: Callable[[], object], device: str, calls: int) -> tuple[float, float]:
    """One timed round of `calls` calls waiting for the device after each (time_calls_synced),
    with a reading of the host's launch speed just before it: (milliseconds a call, µs a
    launch)."""
    reading = launch_probe_us(device)
    return time_calls_synced(fn, 1, device, calls)[0], reading


# A probe's launches: a few milliseconds of host time, so that one reading per timed round
# costs little beside the round itself.
PROBE_LAUNCHES = 500


def launch_probe_us(device: str, launches: int = PROBE_LAUNCHES) -> float:
    """Microseconds per launch of a one-element in-place add, `launches` back to back and
    one wait at the end: how fast the host launches work at this moment. Why: a
    launch-bound module's wall time follows the host's launch speed, and on the H200 VM
    that speed held a level for about a job and changed between jobs a minute apart
    (docs/findings.md). A reading beside each timed round tells a slow host from a
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
