"""The other jobs of a packed GPU, paused while one times a launch-bound step
(hydra.launcher.pause_while_timing=true; off by default).

Packed jobs are kept off the lease holder's launch cores (tasks/gpu_lease.py), but they
still share the host's memory, caches and launch path with it. With this on, while the
holder runs a phase whose figures follow the host's launch speed (tasks/job.py: `alone`),
it stops the other jobs of its GPU with SIGSTOP on their process groups (a job runs in a
session of its own, its compile workers with it: sweeper/sweep/job_process.py) and
continues them after: nothing but the holder runs on the host's cores. They lose that time.
On an H200 VM it cost a packed night 19 s of 166 and did not bring launch-bound steps
measurably closer to one job a GPU, whose own run-to-run spread is larger (the VM's launch
speed: docs/findings.md, "One GPU kept busy"); hence off by default.

Nothing is left stopped:
- each job registers its process group beside the GPU's lock (`<gpu>.job.<pid>`, with the
  process's start time, so that a reused pid is never signalled);
- the pauser marks its pause (`<gpu>.pause.<pid>`) before stopping anyone, and continues
  them before unmarking;
- each job's launching process (job_process.run_job_process, never paused itself) is a
  watchdog: a job stopped while no live process marks a pause, or for longer than
  MAX_PAUSE_S, is continued. So a pauser that dies, or one that hangs, frees the others.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MAX_PAUSE_S = 300.0  # longer than any phase measured; past it a pause is taken for a hang
# The folder of a node's GPU leases (tasks/gpu_lease.py), node-local and shared by every
# sweep on the node; the pause's files lie beside each GPU's lock.
LEASE_DIR = "/tmp/sweeper-gpu-lease"


def safe_name(key: str) -> str:
    """The GPU's key as the stem of its files in the lease folder."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)


def wanted(pause_others: bool, jobs_per_gpu: int) -> bool:
    """Whether a job pauses others and is paused: asked for, and its GPU packed."""
    return bool(pause_others) and jobs_per_gpu > 1


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command's name (field 3 on), None: no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rpartition(")")[2].split()


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (field 22): with the pid, it names one
    process for good. None: no such process."""
    fields = _stat(pid)
    return fields[19] if fields else None


def state(pid: int) -> str | None:
    """The process's state letter ('T': stopped), None: no such process."""
    fields = _stat(pid)
    return fields[0] if fields else None


class Pauser:
    """One job's side: registered while it runs; pauses the others of its GPU on request."""

    def __init__(self, folder: Path, key: str) -> None:
        self.folder, self.key = Path(folder), key
        self.pid, self.pgid = os.getpid(), os.getpgid(0)
        self.paused: list[tuple[int, int]] = []  # (pid, pgid) stopped now
        self.since = 0.0
        self.stats = {"pauses": 0, "s": 0.0, "jobs": 0}
        self._registration: Path | None = self.folder / f"{key}.job.{self.pid}"
        self._marker = self.folder / f"{key}.pause.{self.pid}"
        try:
            self._registration.write_text(f"{self.pgid} {start_time(self.pid)}")
        except OSError:  # a job that cannot register is never paused: it still runs
            self._registration = None

    def others(self) -> list[tuple[int, int]]:
        """The live registered jobs of this GPU but this one: (pid, pgid). A group shared
        with this process (tests, or a job not in a session of its own) is never stopped."""
        out = []
        for path in self.folder.glob(f"{self.key}.job.*"):
            pid = path.name.rpartition(".")[2]
            if not pid.isdigit() or int(pid) == self.pid:
                continue
            try:
                pgid, started = path.read_text().split()
            except (OSError, ValueError):
                continue
            if start_time(int(pid)) != started:  # ended, and maybe its pid reused: not ours to stop
                path.unlink(missing_ok=True)
                continue
            if int(pgid) != self.pgid:
                out.append((int(pid), int(pgid)))
        return out

    def pause(self) -> None:
        if self.paused:
            return
        targets = self.others()
        if not targets:
            return
        self._marker.write_text(start_time(self.pid) or "")  # first: a watchdog continues a job stopped without it
        self.since = time.time()
        for pid, pgid in targets:
            if _signal(pgid, signal.SIGSTOP):
                self.paused.append((pid, pgid))
        if not self.paused:
            self._marker.unlink(missing_ok=True)

    def resume(self) -> None:
        if not self.paused:
            return
        for _pid, pgid in self.paused:
            _signal(pgid, signal.SIGCONT)
        self._marker.unlink(missing_ok=True)
        self.stats["pauses"] += 1
        self.stats["s"] += time.time() - self.since
        self.stats["jobs"] = max(self.stats["jobs"], len(self.paused))
        self.paused = []

    def end(self) -> None:
        self.resume()
        if self._registration is not None:
            self._registration.unlink(missing_ok=True)
            self._registration = None

    def report(self) -> dict:
        """What the record keeps: how often and how long this job paused the others."""
        return {"pauses": self.stats["pauses"], "s": round(self.stats["s"], 3), "most_jobs": self.stats["jobs"]}


def _signal(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def live_pause(folder: Path, key: str) -> bool:
    """A live process marks a pause of this GPU's jobs."""
    for path in Path(folder).glob(f"{key}.pause.*"):
        pid = path.name.rpartition(".")[2]
        try:
            started = path.read_text().strip()
        except OSError:
            continue
        if pid.isdigit() and state(int(pid)) not in (None, "Z") and start_time(int(pid)) == started:
            return True
    return False


class Watchdog:
    """The launching process's side: counts the time its job spent stopped, and continues a
    job stopped without a live pause or for longer than MAX_PAUSE_S."""

    def __init__(self, folder: str | Path, key: str, pid: int) -> None:
        self.folder, self.key, self.pid = Path(folder), key, pid
        self.stopped_since: float | None = None
        self.paused_s, self.continued = 0.0, 0

    def check(self) -> None:
        now = time.time()
        if state(self.pid) != "T":
            if self.stopped_since is not None:
                self.paused_s += now - self.stopped_since
                self.stopped_since = None
            return
        if self.stopped_since is None:
            self.stopped_since = now
        if now - self.stopped_since > MAX_PAUSE_S or not live_pause(self.folder, self.key):
            _signal(self.pid, signal.SIGCONT)
            self.continued += 1
