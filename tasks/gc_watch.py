"""Python's garbage collector during a job: how often it ran in each phase and for how
long, and a pause for timed loops.

Why: after a compile the job's process holds the compiler's objects (about 800,000 after
resnet18 on a CPU; a full collection of them took 0.76 s there). A full collection that
lands inside a timed round adds that stall to the round, which the `-p` harness, a fresh
process with a small heap, never pays. On the H200, densenet121's forward module had one
round of 120 ms a call among rounds of 14 ms: the size of such a stall.
Timed loops therefore run with automatic collection off, as `timeit` does, and the record
says per phase how many collections ran and how long they took, so that the effect can be
read rather than guessed.
"""

from __future__ import annotations

import contextlib
import gc
import time

_pause = True


def set_pause(on: bool) -> None:
    """Whether paused() turns automatic collection off (measure.pause_gc)."""
    global _pause
    _pause = bool(on)


@contextlib.contextmanager
def paused():
    """Automatic collection off inside the block (when set_pause(True)), then back to
    what it was. Collections owed run after the block, outside the timing."""
    was_on = gc.isenabled()
    if _pause and was_on:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class GcWatch:
    """Counts collections and their seconds per phase (gc.callbacks), from install() to
    uninstall(). Not thread-safe by design: phases change on the job's main thread, and
    a collection is attributed to the phase current when it started."""

    def __init__(self) -> None:
        self.phase = "start"
        self.by_phase: dict[str, dict] = {}
        self._started: float | None = None

    def _callback(self, stage: str, info: dict) -> None:
        if stage == "start":
            self._started = time.perf_counter()
            return
        if self._started is None:
            return
        took = time.perf_counter() - self._started
        self._started = None
        row = self.by_phase.setdefault(self.phase, {"collections": 0, "full": 0, "seconds": 0.0, "longest_s": 0.0})
        row["collections"] += 1
        row["full"] += info.get("generation") == 2
        row["seconds"] += took
        row["longest_s"] = max(row["longest_s"], took)

    def install(self) -> "GcWatch":
        gc.callbacks.append(self._callback)
        return self

    def uninstall(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._callback)

    def report(self) -> dict:
        """{phase: {collections, full (generation 2), seconds, longest_s}}, rounded."""
        return {p: {"collections": r["collections"], "full": r["full"], "seconds": round(r["seconds"], 4),
                    "longest_s": round(r["longest_s"], 4)} for p, r in self.by_phase.items()}
