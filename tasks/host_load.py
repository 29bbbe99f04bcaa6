"""How busy the rest of the host was during each phase of a job: the average number of
CPU cores doing work that is not this job's process.

Why: launch-bound figures (a module of 800 small kernels, a small-batch step) move with
what else runs on the host. On two H200s a module took 0.785 ms a call in a job that
ran alone and 1.215 ms in one that measured beside another job's compile, with the same
kernel time. The part of compile that is not autotuning took 35 s alone and 43 to 48 s
beside another compile (docs/findings.md). The
1-minute load average cannot tell this apart: right after a job's own compile it is high
on an idle host. So each phase records the host's busy CPU time (/proc/stat) minus that
of the job's own process tree (/proc/<pid>/stat of the job and its descendants, the
compile workers among them), over the phase's wall time. Linux only; elsewhere nothing
is recorded.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_STAT = "/proc/stat"


def busy_ticks(stat_text: str) -> int | None:
    """Busy CPU time of the whole host, in clock ticks, from /proc/stat's first line:
    every field but idle and iowait (guest time is already inside user and nice)."""
    for line in stat_text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
            return sum(values) - values[3] - values[4]
    return None


def parse_pid_stat(text: str) -> tuple[int, int] | None:
    """(parent pid, user + system clock ticks) from one /proc/<pid>/stat line. The
    command name sits in parentheses and may hold spaces, so fields count after ')'."""
    rest = text[text.rfind(")") + 2:].split()
    if len(rest) < 13:
        return None
    return int(rest[1]), int(rest[11]) + int(rest[12])  # ppid; utime, stime


def tree_ticks(stats: dict[int, tuple[int, int]], root: int) -> int:
    """CPU ticks of `root` and all its descendants, from {pid: (ppid, ticks)}."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


def other_busy_cores(host_ticks: int, own_ticks: int, wall_s: float, ticks_per_s: float) -> float | None:
    """Average cores busy with other work over `wall_s`: the host's busy ticks minus
    this job's own (its process tree), over the wall time; never below 0 (rounding)."""
    if wall_s <= 0:
        return None
    return max(0.0, (host_ticks - own_ticks) / ticks_per_s / wall_s)


@dataclass
class _Sample:
    wall: float
    host_ticks: int
    own_ticks: int


def _process_stats() -> dict[int, tuple[int, int]]:
    stats = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    parsed = parse_pid_stat(f.read())
            except OSError:  # the process ended meanwhile
                continue
            if parsed:
                stats[int(entry.name)] = parsed
    return stats


class HostLoad:
    """Samples at each phase change; report() gives {phase: other busy cores}.
    The job's own process tree (its Inductor compile workers included) is not "other".
    A process of the tree that ends within a phase takes its ticks with it, so that
    phase can read a little high."""

    def __init__(self) -> None:
        self.available = os.path.exists(_STAT)
        self.ticks_per_s = float(os.sysconf("SC_CLK_TCK")) if self.available else 100.0
        self.by_phase: dict[str, float] = {}
        self._last: _Sample | None = None
        self._phase: str | None = None

    def _sample(self) -> _Sample | None:
        try:
            with open(_STAT) as f:
                ticks = busy_ticks(f.read())
            own = tree_ticks(_process_stats(), os.getpid())
        except OSError:
            return None
        return None if ticks is None else _Sample(time.monotonic(), ticks, own)

    def enter(self, phase: str) -> None:
        """Close the current phase and start `phase`."""
        if not self.available:
            return
        now = self._sample()
        if now is not None and self._last is not None and self._phase is not None:
            cores = other_busy_cores(now.host_ticks - self._last.host_ticks, now.own_ticks - self._last.own_ticks,
                                     now.wall - self._last.wall, self.ticks_per_s)
            if cores is not None:
                self.by_phase[self._phase] = round(cores, 2)
        self._last, self._phase = now, phase

    def report(self) -> dict:
        return dict(self.by_phase)
