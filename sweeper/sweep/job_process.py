"""Run one job in a fresh Python process and always come back with a result record.

A fresh process per job keeps Inductor's in-memory caches, CUDA state and crashes inside
the job. If the process dies (segfault, CUDA error, OOM kill) or runs past its time
limit, the launcher writes the failed record itself, with the last lines of the log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from sweeper.host_pause import LEASE_DIR, Watchdog, safe_name, wanted
from sweeper.job_spec import JobSpec
from sweeper.record import PHASE_MARK, Record, RecordError, new_record, no_colour, read_record, write_record
from sweeper.stores import autotune_store, compile_store

_REPO_ROOT = Path(__file__).resolve().parents[2]  # holds sweeper/ and tasks/


def progress_printer(job_id: str) -> Callable[[str], None]:
    """Prints a job's phase lines as "[job N]   12s phase compile" (both launchers)."""
    t0 = time.time()
    return lambda line: print(f"[job {job_id}] {time.time() - t0:5.0f}s {line}", flush=True)


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


def last_phase(log_path: Path) -> str | None:
    """The last phase a job's log announced ("[sweeper] phase compile"), None if none."""
    mark = f"{PHASE_MARK} phase "
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - (1 << 20)))  # the last MiB: a compile's warnings can be long
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    phases = [line[len(mark):].strip() for line in lines if line.startswith(mark)]
    return phases[-1] if phases else None


def failed_record(spec: JobSpec, job_dir: Path, reason: str, duration_s: float, status: str = "failed") -> Record:
    """The record of a job that could not write its own (crash, time-out, lost worker)."""
    record = new_record(spec, job_dir)
    tail = log_tail(job_dir / "job.log")
    record["status"], record["reason"], record["log_tail"] = status, no_colour(reason), tail
    record["phase"] = last_phase(job_dir / "job.log") or "process"
    record["job"]["duration_s"] = round(duration_s, 3)
    left = autotune_store.left_in(job_dir)
    if left is not None:  # what the job had tuned when it was stopped: the launcher brings it to the store
        if left.get("stopped_in") and left.get("phase_started_at"):
            left["phase_s_at_stop"] = round(time.time() - left.pop("phase_started_at"), 1)
        record["timings"]["autotune_store"] = left
    if spec.earlier_attempts:  # the runs of this job stopped before this one, as the launcher gave them
        record["timings"].setdefault("autotune_store", {}).setdefault("earlier_attempts", spec.earlier_attempts)
    return record


def _prepare(spec: JobSpec, job_dir: Path) -> JobSpec:
    """The job folder made, an earlier compile's bytes beside job.json (not in it), job.json
    written, a result of an earlier run in this folder removed; the spec as written."""
    job_dir.mkdir(parents=True, exist_ok=True)
    spec = compile_store.place_seed(spec, job_dir)
    (job_dir / "job.json").write_text(json.dumps(spec.to_json(), indent=1, default=str))
    (job_dir / "result.json").unlink(missing_ok=True)
    return spec


def _job_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _watch(proc: subprocess.Popen, log_path: Path, progress: Callable[[str], None] | None,
           watchdog: Watchdog | None, timeout_s: float | None, started: float) -> str | None:
    """Until the job process ends: its phase lines relayed, its pauses watched, and the
    process killed past its time limit (the time it stood paused not counted); the reason
    when it was killed, else None."""
    offset = 0
    try:
        while True:
            try:
                proc.wait(timeout=0.5 if watchdog else 1.0)
                break
            except subprocess.TimeoutExpired:
                pass
            offset = _relay(log_path, offset, progress)
            if watchdog:
                watchdog.check()
            paused = watchdog.paused_s if watchdog else 0.0
            if timeout_s and time.time() - started - paused > timeout_s:
                _kill(proc)
                _relay(log_path, offset, progress)
                return f"timed out after {timeout_s:.0f} s (timeout_s); the process was killed"
    except BaseException:
        _kill(proc)  # Ctrl-C: leave no orphaned compile behind
        raise
    _relay(log_path, offset, progress)
    return None


def run_job_process(
    spec: JobSpec,
    job_dir: Path,
    timeout_s: float | None = None,
    progress: Callable[[str], None] | None = None,
) -> Record:
    """Run `python -m tasks.job job_dir` (under the job's own interpreter when its spec
    names one: config key `python`), relay its phase lines to `progress`, and return its
    result record (written by the job, or here when the process did not write one)."""
    spec = _prepare(spec, job_dir)
    log_path = job_dir / "job.log"
    started = time.time()
    with open(log_path, "w+b") as log:  # readable too: _log_if_removed
        # A session of its own, so that a timeout kills the job's compile workers too.
        proc = subprocess.Popen(
            [spec.python_executable or sys.executable, "-m", "tasks.job", str(job_dir)],
            stdout=log, stderr=subprocess.STDOUT, env=_job_env(), cwd=str(_REPO_ROOT),
            start_new_session=True, preexec_fn=_die_with_parent,
        )
        # A packed job may be paused while another times its GPU (sweeper/host_pause.py): the
        # time it spent stopped does not count against its limit, and a pause whose pauser
        # died or hung is ended here.
        watchdog = _watchdog(spec, proc.pid)
        reason = _watch(proc, log_path, progress, watchdog, timeout_s, started)
        _kill_group(proc.pid)  # compile workers the job left behind
        removed_log = _log_if_removed(log, log_path)
    duration = time.time() - started
    if removed_log is not None:
        # Something else on this machine removed the job's folder under it (its files with
        # it): what the job printed is still in the open log, written back where it was.
        job_dir.mkdir(parents=True, exist_ok=True)
        log_path.write_bytes(removed_log)
        removed = (f"its folder {job_dir} was removed or replaced while the job ran, by another process on "
                   f"this machine (job process exit code {proc.returncode}); its log is kept from the file it wrote")
        reason = f"{reason}; {removed}" if reason else removed
    if reason is None:
        try:
            record = read_record(job_dir)
            # The child's whole life, interpreter start and torch import included: the
            # job's own run time as the launcher sees it (bench/ray_overhead.py).
            record["job"]["process_s"] = round(duration, 3)
            if watchdog and watchdog.paused_s:  # stopped while other jobs of its GPU timed
                record["timings"].setdefault("gpu_lease", {})["paused_by_others_s"] = round(watchdog.paused_s, 1)
            write_record(job_dir, record)
            return record
        except RecordError as e:
            code = proc.returncode
            how = f"killed by signal {-code}" if code and code < 0 else f"exited with code {code}"
            reason = f"job process {how} without a valid result record ({e})"
    record = failed_record(spec, job_dir, reason, duration)
    write_record(job_dir, record)
    return record


def _watchdog(spec: JobSpec, pid: int) -> Watchdog | None:
    """The watch over a packed job's pauses, None for a job that no other job pauses."""
    lease = spec.gpu_lease
    if lease is None or not wanted(lease.pause_others, lease.jobs_per_gpu):
        return None
    return Watchdog(LEASE_DIR, safe_name(lease.key), pid)


def _log_if_removed(log, log_path: Path) -> bytes | None:
    """The job's log as the job wrote it (its last 4 MiB), when its file is no longer at
    log_path (removed, or the folder replaced); None while it is in place."""
    st = os.fstat(log.fileno())
    try:
        if os.stat(log_path).st_ino == st.st_ino:
            return None
    except OSError:
        pass
    keep = min(st.st_size, 1 << 22)
    return os.pread(log.fileno(), keep, st.st_size - keep)  # the child shares the offset: pread moves none


def _relay(log_path: Path, offset: int, progress: Callable[[str], None] | None) -> int:
    if progress is None:
        return offset
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return offset
    end = chunk.rfind(b"\n") + 1
    for line in chunk[:end].decode("utf-8", "replace").splitlines():
        if line.startswith(PHASE_MARK):
            progress(line[len(PHASE_MARK):].strip())
    return offset + end


def _die_with_parent() -> None:
    """In the child: be killed when the launching process dies (a Ray worker killed on
    Ctrl-C or a lost node), since a session of its own escapes the parent's group."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    _kill_group(proc.pid)
    proc.wait()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
