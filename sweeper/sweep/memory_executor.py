"""An executor that runs nothing (sweeper/sweep/scheduler.py, Executor): each job ends as a
given rule says, in the order submitted, and is recorded as a job records itself. The
scheduling policy's tests (tests/test_scheduler.py) and its bench at scale
(bench/scheduler_scale.py) run the real scheduler against it, in milliseconds."""

from __future__ import annotations

from typing import Callable

from sweeper.record import Record, write_record
from sweeper.sweep.control import Job, launch_spec
from sweeper.sweep.job_process import failed_record
from sweeper.sweep.executor import Cluster, ResultsNotWritten

ONE_GPU = ({"Alive": True, "NodeID": "n0", "Resources": {"CPU": 16.0, "GPU": 1.0}},)


class MemoryExecutor:
    """`outcome(job, attempt)`: "ok", or the reason the job failed; `interrupt_after`: Ctrl-C
    once that many jobs ended; `unwritable`: the job whose results cannot be written."""

    def __init__(self, nodes: tuple[dict, ...] = ONE_GPU, memory_gib: float | None = 80.0,
                 outcome: Callable[[Job, int], str] | None = None, interrupt_after: int | None = None,
                 unwritable: int | None = None) -> None:
        self.nodes, self.memory_gib = nodes, memory_gib
        self.outcome = outcome or (lambda job, attempt: "ok")
        self.interrupt_after, self.unwritable = interrupt_after, unwritable
        self.submitted: list[tuple[int, dict, int]] = []  # (job, resources, jobs a GPU), in order
        self.running: list[tuple[int, int]] = []  # handles: (job, attempt)
        self.most_at_once = 0
        self.ended = 0
        self.cancelled: list[int] = []
        self.attempts: dict[int, int] = {}

    def start(self) -> Cluster:
        return Cluster(self.nodes, self.memory_gib)

    def check_pythons(self, envs: dict[str, str], need_triton: bool) -> list[str]:
        return []

    def submit(self, job: Job, spec, resources: dict, jobs_per_gpu: int) -> tuple[int, int]:
        attempt = self.attempts.get(job.num, 0)  # counted, not searched: a 10,000-job sweep submits 10,000 times
        self.attempts[job.num] = attempt + 1
        self.submitted.append((job.num, dict(resources), jobs_per_gpu))
        handle = (job.num, attempt)
        self.running.append(handle)
        self.most_at_once = max(self.most_at_once, len(self.running))
        return handle

    def wait(self, handles: list, timeout_s: float) -> list:
        if self.interrupt_after is not None and self.ended >= self.interrupt_after:
            raise KeyboardInterrupt
        first = next(h for h in self.running if h in handles)
        self.running.remove(first)
        self.ended += 1
        return [first]

    def collect(self, handle: tuple[int, int], job: Job, took_s: float) -> Record:
        if handle[0] == self.unwritable:
            raise ResultsNotWritten(job, OSError(28, "No space left on device"), self.scratch_of(job), "node0")
        got = self.outcome(job, handle[1])
        record = failed_record(launch_spec(job), job.job_dir, got, took_s, status="ok" if got == "ok" else "failed")
        if got == "ok":
            record["reason"] = None
        write_record(job.job_dir, record)
        return record

    def cancel(self, handles: list) -> None:
        self.cancelled += [h[0] for h in handles]
        self.running = [h for h in self.running if h not in handles]

    def scratch_of(self, job: Job) -> str:
        return f"/scratch/{job.num}"

    def salvage(self, jobs: list[Job]) -> int:
        return 0

    def record_without_worker(self, job: Job, reason: str, took_s: float, status: str) -> Record:
        record = failed_record(launch_spec(job), job.job_dir, reason, took_s, status=status)
        write_record(job.job_dir, record)
        return record
