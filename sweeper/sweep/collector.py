"""A finished job's results read off the scheduler's loop (sweeper/sweep/scheduler.py): the
executor's collect (on Ray, its record and, without shared storage, its folder's bundle
unpacked into the sweep folder) and the stores' exchange (sweeper/stores/exchange.py) run on
a thread of their own, so that the loop that starts jobs starts the next one as soon as a
slot frees, not after the last job's folder is written. One thread: jobs' results are
written one at a time, in the order their jobs ended, as before.
"""

from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass
from typing import Any, Callable

from sweeper.record import Record
from sweeper.sweep.control import Job


@dataclass
class Collected:
    job: Job
    took: float  # seconds from its submission to its end
    record: Record | None  # None where collecting raised: `error`
    error: BaseException | None = None


class Collector:
    def __init__(self, collect: Callable[[Any, Job, float], Record]) -> None:
        self._collect = collect
        self._pool = cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweeper-collect")
        self._running: dict[cf.Future, tuple[Job, float]] = {}

    def __len__(self) -> int:
        return len(self._running)

    def add(self, handle: Any, job: Job, took: float) -> None:
        self._running[self._pool.submit(self._collect, handle, job, took)] = (job, took)

    def done(self, timeout: float = 0.0) -> list[Collected]:
        """The jobs whose results are read, in the order their jobs ended, waiting up to
        `timeout` seconds for the first."""
        if timeout and self._running:
            cf.wait(list(self._running), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        out = []
        for future in [f for f in self._running if f.done()]:  # insertion order: the order the jobs ended
            job, took = self._running.pop(future)
            error = future.exception()
            out.append(Collected(job, took, None if error else future.result(), error))
        return out

    def finish(self) -> list[Collected]:
        """Every job being collected, to its end (Ctrl-C: finished jobs' results are kept)."""
        cf.wait(list(self._running))
        return self.done()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
