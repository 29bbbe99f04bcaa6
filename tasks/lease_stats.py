"""What a job's GPU lease (tasks/gpu_lease.py) counts for its record: how often the job took
it and waited for it, for its phases and for Inductor's benchmarks apart, how long it held
it, and the spans of its phase-level holds (docs/result-schema.md, timings.gpu_lease)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class BenchmarkHolds:
    acquired: int = 0
    wait_s: float = 0.0
    held_s: float = 0.0


@dataclass
class LeaseStats:
    acquired: int = 0  # phase-level takes; a benchmark's are in `benchmarks`
    waits: int = 0  # takes that waited 10 ms or more, benchmarks included
    wait_s: float = 0.0
    longest_wait_s: float = 0.0
    held_s: float = 0.0
    wait_by_phase: dict[str, float] = field(default_factory=dict)
    benchmarks: BenchmarkHolds = field(default_factory=BenchmarkHolds)
    yielded: int = 0  # times a job holding it for its phases gave it up to another job's benchmark
    spans: list[list] = field(default_factory=list)  # [start, end, what] of each phase-level hold (absolute seconds)

    def taken(self, what: str, waited: float) -> None:
        if what == "benchmark":
            self.benchmarks.acquired += 1
            self.benchmarks.wait_s += waited
        else:
            self.acquired += 1
        if waited >= 0.01:
            self.waits += 1
            self.wait_s += waited
            self.longest_wait_s = max(self.longest_wait_s, waited)
            phase = "compile (benchmarks)" if what == "benchmark" else what
            self.wait_by_phase[phase] = self.wait_by_phase.get(phase, 0.0) + waited

    def given_back(self, what: str, start: float, end: float) -> None:
        if what == "benchmark":
            self.benchmarks.held_s += end - start
        else:
            self.held_s += end - start
            self.spans.append([round(start, 3), round(end, 3), what])

    def report(self) -> dict:
        """The record's figures (seconds to the millisecond), in its order."""
        bench = self.benchmarks
        return {"acquired": self.acquired, "waits": self.waits, "wait_s": round(self.wait_s, 3),
                "longest_wait_s": round(self.longest_wait_s, 3), "held_s": round(self.held_s, 3),
                "wait_by_phase": {k: round(v, 3) for k, v in self.wait_by_phase.items()},
                "benchmarks": {"acquired": bench.acquired, "wait_s": round(bench.wait_s, 3),
                               "held_s": round(bench.held_s, 3)},
                "yielded": self.yielded}
