"""A GPU's lease: whatever a job times on its GPU, it times holding the lease, so that jobs
packed onto one GPU (hydra.launcher.jobs_per_gpu, sweeper/sweep/packing.py) never time at
once.

The lease is an exclusive flock on a node-local file named after the GPU (its UUID), so:
- one holder per GPU on the node, whatever sweep or process it belongs to;
- a holder that dies (killed, crashed) frees it at once: the kernel drops the lock with the
  last descriptor, so no stale lease outlives a job;
- a waiting thread blocks in flock with the GIL released: the job's heartbeat goes on and
  says whom it waits for (the holder writes a line beside the lock).

Within one job the lease is re-entrant, for all its threads (a phase that holds it may call
Inductor's benchmarks, which take it too, some from helper threads:
torch_internals/benchmark_lease.leased_benchmarks).

Who goes first: a compile's benchmark is short and the compile waits on it, while a job's
timed phases hold the lease for 30 s or more; on an H200 compiles beside each other waited
66 to 118 s for theirs (bench/results/packing/). So a benchmark that has to wait says so (a
`<gpu>.bench.<pid>` file beside the lock); a job holding the lease for its phases gives it
up between two phases while one waits, and takes it back before any other job's phases (its
`<gpu>.resume.<pid>` file); a job about to start its phases lets both go first. No two
holds ever overlap: only the order changes.

While jobs share a GPU, the holder's launches must not wait behind another job's compile:
every packed job runs on the node's shared cores, and the holder alone adds its GPU's
launch cores while it holds the lease (packing.launch_cpus). A job alone on its GPU keeps
every core, as before. With hydra.launcher.pause_while_timing, through a phase whose
figures follow the host's launch speed (tasks/job.py: `alone`), the holder also pauses the
other jobs of its GPU (sweeper/host_pause.py).
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from sweeper.host_pause import LEASE_DIR, Pauser, safe_name, wanted
from sweeper.job_spec import GpuLeaseSpec
from tasks.lease_stats import LeaseStats


class GpuLease:
    def __init__(self, key: str, lock_dir: str | Path, job_id: str, cpus_shared: list[int] | None = None,
                 cpus_leased: list[int] | None = None, jobs_per_gpu: int = 1, log_path: str | None = None,
                 pause_others: bool = False) -> None:
        self.key, self.job_id, self.jobs_per_gpu = key, str(job_id), jobs_per_gpu
        self.cpus_shared, self.cpus_leased = cpus_shared, cpus_leased
        folder = Path(lock_dir)
        folder.mkdir(parents=True, exist_ok=True)
        try:  # every user's jobs on the node share the folder (sticky, like /tmp)
            os.chmod(folder, 0o1777)
        except OSError:
            pass
        safe = safe_name(key)
        self.path, self.holder_path = folder / f"{safe}.lock", folder / f"{safe}.holder"
        self.log_path = log_path
        self._cond = threading.Condition()
        self._depth, self._taking, self._held_since, self._what = 0, False, 0.0, ""
        self._fd: int | None = None  # the lock file's descriptor while this job holds the lease
        self._phase_hold = False
        self._safe, self._folder = safe, folder
        self.waiting: tuple[float, str] | None = None  # (since, for what) while this job waits
        self.stats = LeaseStats()  # what the record says of the lease (tasks/lease_stats.py)
        # the other jobs of this GPU, paused through this job's `alone` phases (packed jobs only)
        self.pauser = Pauser(folder, safe) if wanted(pause_others, jobs_per_gpu) else None

    # --- taking and giving back ---------------------------------------------------------
    def acquire(self, what: str) -> float:
        """Take the lease (blocking); the seconds waited. Re-entrant for the whole process,
        not one thread: Inductor benchmarks template choices from helper threads while the
        main thread may hold the lease for its phase."""
        with self._cond:
            if self._depth > 0:
                self._depth += 1
                return 0.0
            while self._taking:  # another thread of this job waits in flock: share its turn
                self._cond.wait()
                if self._depth > 0:
                    self._depth += 1
                    return 0.0
            self._taking = True
        t0 = time.time()
        try:
            fd = self._take(what, t0)
        except BaseException:
            with self._cond:
                self._taking = False
                self._cond.notify_all()
            raise
        now = time.time()
        waited = now - t0
        with self._cond:
            self._fd, self._held_since, self._what = fd, now, what
            self._depth, self._taking = 1, False
            self._write_holder(what)
            if self.cpus_leased:
                set_process_cpus(self.cpus_leased)
            self.stats.taken(what, waited)
            self._cond.notify_all()
        return waited

    def _take(self, what: str, t0: float) -> int:
        """The flock, in the order the module's docstring gives: a benchmark waits in flock
        with its marker up; a job's phases wait while another job's benchmark or resumption
        is marked, and let go of a flock won before them."""
        benchmark = what == "benchmark"
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            while True:
                if not benchmark and self._others_first():
                    self.waiting = self.waiting or (t0, what)
                    time.sleep(0.02)
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    self.waiting = self.waiting or (t0, what)
                    marker = self._marker("bench") if benchmark else None
                    if marker is not None:
                        marker.touch()
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX)
                    finally:
                        if marker is not None:
                            marker.unlink(missing_ok=True)
                if benchmark or not self._others_first():
                    return fd
                fcntl.flock(fd, fcntl.LOCK_UN)  # won before a benchmark or a resuming job: theirs first
        except BaseException:
            os.close(fd)
            raise
        finally:
            self.waiting = None

    def _marker(self, kind: str) -> Path:
        return self._folder / f"{self._safe}.{kind}.{os.getpid()}"

    def _others_first(self) -> bool:
        """Another live process's benchmark waits, or another job resumes its phases."""
        try:
            names = os.listdir(self._folder)
        except OSError:
            return False
        mine = os.getpid()
        for name in names:
            stem, _, pid = name.rpartition(".")
            if stem in (f"{self._safe}.bench", f"{self._safe}.resume") and pid.isdigit() and int(pid) != mine:
                if _alive(int(pid)):
                    return True
        return False

    def release(self) -> None:
        with self._cond:
            if self._depth <= 0:
                return
            self._depth -= 1
            if self._depth > 0:
                return
            if self.cpus_shared:
                set_process_cpus(self.cpus_shared)
            end = time.time()
            self.stats.given_back(self._what, self._held_since, end)
            if self.log_path:  # the tests' witness of every hold, benchmarks included
                with open(self.log_path, "a") as f:
                    f.write(f"{self.key} {os.getpid()} {self.job_id} {self._held_since:.6f} {end:.6f} {self._what}\n")
            fd, self._fd = self._fd, None
            assert fd is not None  # held: acquire() set it
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextmanager
    def hold(self, what: str = "benchmark"):
        self.acquire(what)
        try:
            yield
        finally:
            self.release()

    def benchmark_hold(self):
        """The context Inductor's benchmarks run in (torch_internals/benchmark_lease.leased_benchmarks)."""
        return self.hold("benchmark")

    # --- phase by phase (tasks/job.py) --------------------------------------------------
    def for_phase(self, name: str, timed: bool, alone: bool = False) -> None:
        """Entering phase `name`: a phase that times the GPU holds the lease (kept across
        consecutive such phases, so that no other job times between them); one that does
        not gives it back. Through a timed phase that must run `alone`, the other jobs of
        this GPU are paused (host_pause.py)."""
        if self.pauser is not None and not (timed and alone):
            self.pauser.resume()
        if timed and not self._phase_hold:
            self.acquire(name)
            self._phase_hold = True
        elif timed and self._depth == 1 and self._others_first():
            self._yield_to_benchmarks(name)
        elif not timed and self._phase_hold:
            self._phase_hold = False
            self.release()
        if self.pauser is not None and timed and alone:
            self.pauser.pause()

    def _yield_to_benchmarks(self, name: str) -> None:
        """Between two timed phases: the waiting benchmarks go, then this job's next phase,
        before any other job's phases (the resume marker)."""
        marker = self._marker("resume")
        marker.touch()
        if self.pauser is not None:  # the benchmark's job may be among the paused
            self.pauser.resume()
        try:
            self._phase_hold = False
            self.release()
            self.stats.yielded += 1
            self.acquire(name)
            self._phase_hold = True
        finally:
            marker.unlink(missing_ok=True)

    def end(self) -> None:
        if self.pauser is not None:
            self.pauser.end()
        if self._phase_hold:
            self._phase_hold = False
            self.release()

    # --- what the heartbeat and the record say ---------------------------------------------
    def holder(self) -> str:
        """Who holds the lease now, as the holder wrote it ("job 3, phase timing")."""
        try:
            return self.holder_path.read_text().strip() or "another job"
        except OSError:
            return "another job"

    def waiting_line(self) -> str | None:
        """"waiting 25 s for the GPU (held by job 3, phase timing)", or None when not waiting."""
        waiting = self.waiting
        if waiting is None:
            return None
        return f"waiting {time.time() - waiting[0]:.0f} s for the GPU (held by {self.holder()})"

    def report(self) -> dict:
        return {"gpu": self.key, "jobs_per_gpu": self.jobs_per_gpu, **self.stats.report(),
                "paused_others": self.pauser.report() if self.pauser else None,
                "spans": self.stats.spans, "cpus_shared": self.cpus_shared, "cpus_leased": self.cpus_leased}

    def _write_holder(self, what: str) -> None:
        try:
            self.holder_path.write_text(f"job {self.job_id} (pid {os.getpid()}), {what}")
        except OSError:  # the line is for people reading a heartbeat, never a failure
            pass


def _alive(pid: int) -> bool:
    """A marker's process still runs (a killed one leaves its marker behind)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def set_process_cpus(cpus: list[int]) -> None:
    """Every thread of this process onto `cpus` (sched_setaffinity acts on one thread; new
    threads inherit their creator's). Child processes keep theirs: a job's compile workers
    stay on the shared cores."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended meanwhile
            pass


def from_spec(lease: GpuLeaseSpec | None, job_id: str) -> GpuLease | None:
    """The job's lease from its spec (the launcher's `gpu_lease`); None when the launcher gave
    the job no GPU. The job's threads go onto the shared cores first, when it is packed."""
    if lease is None:
        return None
    got = GpuLease(lease.key, LEASE_DIR, job_id, list(lease.cpus_shared) if lease.cpus_shared else None,
                   list(lease.cpus_leased) if lease.cpus_leased else None, lease.jobs_per_gpu,
                   os.environ.get("SWEEPER_LEASE_LOG"), lease.pause_others)
    if got.cpus_shared:
        set_process_cpus(got.cpus_shared)
    return got
