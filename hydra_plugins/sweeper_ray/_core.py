"""The Ray launcher's logic.

Why our own launcher: the published hydra-ray-launcher pinned an old Ray for years, pulls
boto3 and aiohttp, and loses every result when one worker crashes (shared/DESIGN.md).

How a sweep runs:
- Ray is embedded (a local Ray on 127.0.0.1, no dashboard, token authentication on) unless an address is given
  (config `address` or $RAY_ADDRESS), in which case the driver asks the cluster for
  nothing at init.
- Each job is a Ray task with max_calls=1, so it gets a fresh worker process, holding one
  GPU where there are GPUs (all of a node's CPUs on a CPU-only cluster). Inside, the job
  runs in its own child process (sweeper.sweep.job_process), which turns crashes and time-outs into
  failed records with the log's tail.
- The job folder lives in node-local scratch; its record and artifacts (traces, module
  copies, log; not the compile caches) come back through Ray as one compressed bundle
  and land in the driver's sweep folder, so nodes need not share a disk.
- A task whose worker or node died is retried (max_retries_on_node_loss); a job that
  failed on its own is not.
- Finished jobs are kept: summary.json is rewritten (atomically) after each job, and a
  second run into the same sweep folder skips jobs whose result says ok.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import logging
import os
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from omegaconf import DictConfig, OmegaConf, open_dict

from sweeper.sweep import summary as sm
from sweeper.sweep.job_process import failed_record
from sweeper.record import RecordError, read_record, relocate, write_record
from sweeper.sweep.validate import SweepConfigError, check_output_dir, check_ray_address, check_sweep, stop_on_problem

log = logging.getLogger(__name__)
_REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Job:
    num: int
    overrides: list[str]
    config: DictConfig  # with its hydra node
    job_dir: Path  # in the driver's sweep folder
    spec: dict

    @property
    def name(self) -> str:
        return " ".join(filter_overrides(self.overrides)) or "defaults"


def init_ray(conf: dict) -> str:
    address = conf.get("address") or os.environ.get("RAY_ADDRESS")
    if not address:
        _loopback_only()
    import ray

    if ray.is_initialized():
        return "already initialized"
    if address:
        # An existing cluster: ask it for nothing (resources, dashboard) at init. A dead
        # address would keep ray.init retrying for minutes: check it in seconds first.
        stop_on_problem(check_ray_address, address, float(conf.get("connect_timeout_s") or 10))
        ray.init(address=address, runtime_env=dict(conf.get("runtime_env") or {}) or None)
        return f"joined Ray cluster at {address}"
    # Workers inherit the driver's environment. PYTHONPATH goes there, not into a
    # runtime_env: Ray prestarts idle workers only for the default environment, and a
    # fresh worker per job (max_calls=1) then starts in about 0.5 s instead of 0.9 s
    # (2-core CPU machine, bench/results/ray_overhead_cpu.md).
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(_REPO_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), *paths]))
    ray.init(include_dashboard=False)
    return "started an embedded local Ray on 127.0.0.1 (no dashboard, token authentication on)"


def _loopback_only() -> None:
    """Keep an embedded Ray off the network. Passing 127.0.0.1 as the node address does not
    do it: Ray 2.60 swaps it for the machine's reachable address
    (services.resolve_ip_for_localhost), and its GCS, raylet and workers then listen on
    every interface. Its local-only mode (the default on macOS and Windows) does:
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes the node address 127.0.0.1 and every Ray
    process listen there (tests/test_ray_launcher.py). Ray reads the variable when it is
    imported, and its processes inherit it from here."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:  # ray was imported before this (e.g. in a test): its copy too
        constants.ENABLE_RAY_CLUSTER = False


def job_resources(conf: dict) -> dict:
    import ray

    gpus = ray.cluster_resources().get("GPU", 0)
    if conf.get("num_gpus_per_job") is not None:
        want_gpus = conf["num_gpus_per_job"]
    else:
        want_gpus = 1 if gpus else 0
    if conf.get("num_cpus_per_job") is not None:
        cpus = conf["num_cpus_per_job"]
    elif want_gpus:
        cpus = 1
    else:
        cpus = max((n["Resources"].get("CPU", 1) for n in ray.nodes() if n.get("Alive")), default=1)
    return {"num_gpus": want_gpus, "num_cpus": cpus}


def _scratch_key(sweep_dir: Path) -> str:
    return f"{sweep_dir.name}-{hashlib.sha1(str(sweep_dir).encode()).hexdigest()[:8]}"


def compile_threads_share() -> int:
    """This node's cores divided by its GPUs (for a GPU job), capped at Inductor's own 32."""
    import ray

    cpus = len(os.sched_getaffinity(0))
    node = ray.get_runtime_context().get_node_id()
    gpus = next((n["Resources"].get("GPU", 0) for n in ray.nodes() if n.get("NodeID") == node), 0)
    per_job = cpus // int(gpus) if gpus >= 1 and ray.get_gpu_ids() else cpus
    return max(1, min(32, per_job))


def run_in_worker(spec: dict, scratch_job_dir: str, timeout_s: float | None,
                  compile_threads: str = "all") -> dict:
    """Runs on a Ray worker: the job in a child process, then its folder as a bundle."""
    import socket

    from sweeper.sweep.job_process import progress_printer, run_job_process

    if compile_threads == "share" and "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = str(compile_threads_share())  # a fresh worker per job

    job_dir = Path(scratch_job_dir)
    if job_dir.exists():  # an earlier attempt: keep its compile cache, drop the rest
        for p in job_dir.iterdir():
            if p.name != "cache":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    record = run_job_process(spec, job_dir, timeout_s, progress_printer(spec.get("job_id")))
    import ray

    return {"record": record, "bundle": pack(job_dir), "scratch": str(job_dir), "host": socket.gethostname(),
            "node_id": ray.get_runtime_context().get_node_id()}


def pack(job_dir: Path) -> bytes:
    """The job folder, compile caches left out, as tar.gz bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(job_dir.iterdir()):
            if p.name not in ("cache", "job.json"):
                tar.add(p, arcname=p.name)
    return buf.getvalue()


def unpack(bundle: bytes, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("traces", "modules", "reference"):
        shutil.rmtree(dest / name, ignore_errors=True)  # nothing stale from an earlier run
    with tarfile.open(fileobj=io.BytesIO(bundle), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")


def _reusable(job: Job) -> dict | None:
    try:
        record = read_record(job.job_dir)
    except RecordError as e:
        if (job.job_dir / "result.json").exists():
            log.warning(f"#{job.num}: {e}: running the job again")
        return None
    if record["status"] == "ok" and list(record["job"].get("overrides", [])) == job.overrides:
        return record
    return None


def _make_jobs(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Job]:
    jobs = []
    for i, overrides in enumerate(job_overrides):
        num = initial_job_idx + i
        cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
        with open_dict(cfg):
            cfg.hydra.job.id = num
            cfg.hydra.job.num = num
        job_dir = Path(str(cfg.hydra.sweep.dir)).resolve() / str(cfg.hydra.sweep.subdir)
        task_keys = [k for k in cfg.keys() if k != "hydra"]
        task_cfg = OmegaConf.to_container(OmegaConf.masked_copy(cfg, task_keys), resolve=True, enum_to_str=True)
        spec = {"job_id": str(num), "overrides": list(overrides), "config": task_cfg}
        jobs.append(Job(num, list(overrides), cfg, job_dir, spec))
    return jobs


def _save_hydra_files(job: Job) -> None:
    d = job.job_dir / ".hydra"
    d.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(job.spec["config"]), d / "config.yaml")
    OmegaConf.save(OmegaConf.create(job.overrides), d / "overrides.yaml")


class Progress:
    """Jobs done, running, failed, time so far and left. On a terminal: one live line at
    the bottom (rich), with the jobs' own output scrolling above it; otherwise a plain
    line per change (and at least one a minute), for logs and CI."""

    def __init__(self, total: int, reused: int, console=None) -> None:
        self.total, self.reused, self.t0 = total, reused, time.time()
        self.done = self.failed = 0
        self.durations: list[float] = []
        self._last = None
        self._last_print = 0.0
        self._console = console
        self._live = None

    def start(self) -> None:
        if self._console is None and not sys.stdout.isatty():
            return
        from rich.console import Console
        from rich.live import Live

        console = self._console or Console()
        # Ray prints the workers' output through sys.stdout/err: redirected, it scrolls
        # above the live line instead of tearing it.
        self._live = Live(console=console, refresh_per_second=2, redirect_stdout=True, redirect_stderr=True)
        self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def finished(self, status: str, duration: float) -> None:
        self.done += 1
        self.failed += status == "failed"
        self.durations.append(duration)

    def line(self, running: int, slots: int) -> str:
        elapsed = time.time() - self.t0
        left = self.total - self.reused - self.done
        eta = ""
        if self.durations and left:
            per_job = sum(self.durations) / len(self.durations)
            eta = f", about {per_job * left / max(1, min(slots, left)) / 60:.0f} min left"
        return (f"[sweep] {self.done + self.reused}/{self.total} done ({self.reused} from an earlier run), "
                f"{running} running, {self.failed} failed, {elapsed / 60:.1f} min so far{eta}")

    def show(self, running: int, slots: int) -> None:
        line = self.line(running, slots)
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(line, style="bold red" if self.failed else "bold"))
            return
        state = (self.done, running, self.failed)
        if state != self._last or time.time() - self._last_print > 60:
            print(line, flush=True)
            self._last, self._last_print = state, time.time()


def launch(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
    import ray

    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    conf = dict(launcher.conf)
    jobs = _make_jobs(launcher, job_overrides, initial_job_idx)
    _check(jobs, conf=conf)
    sweep_dir = jobs[0].job_dir.parent if jobs else Path(str(launcher.config.hydra.sweep.dir)).resolve()
    if jobs and jobs[0].spec["config"].get("dry_run"):
        print(f"dry run: {len(jobs)} jobs into {sweep_dir}; none started")
        for j in jobs:
            print(f"  #{j.num} {' '.join(o for o in j.overrides if not o.startswith('dry_run='))}")
        sm.LAST_SWEEP = None
        return []
    _confirm(len(jobs), jobs[0].spec["config"] if jobs else {})
    stop_on_problem(check_output_dir, sweep_dir)
    _lock_sweep(sweep_dir)  # held until this process ends
    command = sys.argv[1:]
    started = time.time()

    entries: dict[int, dict] = {}
    records: dict[int, dict] = {}
    to_run = []
    for job in jobs:
        record = _reusable(job) if conf.get("resume", True) else None
        if record is not None:
            entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, record, reused=True)
            records[job.num] = record
        else:
            to_run.append(job)

    pending = {}
    submitted_at = {}
    slots = 1
    if to_run:  # nothing to run (a finished sweep resumed): no Ray at all
        log.info(init_ray(conf))
        res = job_resources(conf)
        total = ray.cluster_resources()
        _check(to_run, gpus_available=total.get("GPU", 0))
        slots = max(1, int(min(total.get("GPU", 0) / res["num_gpus"] if res["num_gpus"] else 1e9,
                               total.get("CPU", 1) / res["num_cpus"] if res["num_cpus"] else 1e9)))
        log.info(f"Launching {len(to_run)} jobs on Ray ({len(jobs) - len(to_run)} kept from an earlier run), "
                 f"{res['num_gpus']} GPU and {res['num_cpus']} CPU each, up to {slots} at a time")
        remote = ray.remote(max_calls=1)(run_in_worker).options(
            max_retries=int(conf.get("max_retries_on_node_loss", 1)), **res)
        scratch_root = Path(conf.get("scratch_dir") or "/tmp/sweeper-scratch") / _scratch_key(sweep_dir)
        for job in sorted(to_run, key=_expected_cost, reverse=True):  # Ray starts them in this order
            _save_hydra_files(job)
            log.info(f"\t#{job.num} : {job.name}")
            timeout = job.spec["config"].get("timeout_s") or None
            ref = remote.remote(job.spec, str(scratch_root / job.job_dir.name), timeout,
                                str(conf.get("compile_threads") or "all"))
            pending[ref] = job
            submitted_at[job.num] = time.time()

    progress = Progress(len(jobs), len(jobs) - len(to_run))
    sm.write_summary(sweep_dir, list(entries.values()), started, command, done=not pending)
    progress.start()
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                job = pending.pop(ref)
                record = _collect(ref, job, time.time() - submitted_at[job.num])
                records[job.num] = record
                entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, record)
                progress.finished(record["status"], time.time() - submitted_at[job.num])
                sm.write_summary(sweep_dir, list(entries.values()), started, command, done=not pending)
            progress.show(min(len(pending), slots), slots)
        progress.show(0, slots)
    except KeyboardInterrupt:
        progress.stop()  # before the message, so that it prints below the live line
        print(f"\n[sweep] interrupted: cancelling {len(pending)} running or queued jobs; finished results are kept",
              flush=True)
        for ref, job in pending.items():
            ray.cancel(ref, force=True)
            record = failed_record(job.spec, job.job_dir, "cancelled (Ctrl-C) before it finished",
                                   time.time() - submitted_at[job.num])
            write_record(job.job_dir, record)
            entries[job.num] = sm.job_entry(job.num, job.overrides, job.job_dir, record)
            entries[job.num]["status"] = "cancelled"
        sm.write_summary(sweep_dir, list(entries.values()), started, command, done=False)
        raise
    finally:  # finished, failed or interrupted: sweeper.__main__ reports it
        progress.stop()  # the live line's last state stays on the screen
        sm.LAST_SWEEP = {"sweep_dir": sweep_dir, "jobs": list(entries.values()), "command": command}
    return [
        JobReturn(overrides=job.overrides, cfg=job.config, hydra_cfg=None, working_dir=str(job.job_dir),
                  task_name="sweeper", status=JobStatus.COMPLETED, _return_value=records[job.num]["status"])
        for job in jobs
    ]


def _expected_cost(job: Job) -> tuple:
    """A rough rank of how long a job takes, to start the longest first: with more jobs
    than GPUs, a long job started last leaves the other GPUs idle at the end. On the
    H200, max-autotune compiles took 3 to 8 times as long as default ones
    (bench/results/h200_session2.md), and training steps longer than inference."""
    cfg = job.spec["config"]
    return (bool(cfg.get("autotune")), cfg.get("mode") == "training", -job.num)


def _confirm(n: int, cfg: dict) -> None:
    limit = cfg.get("confirm_above", 50)
    if n <= limit or cfg.get("yes"):
        return
    question = f"This sweep has {n} jobs (more than confirm_above={limit})."
    if sys.stdin is not None and sys.stdin.isatty():
        if input(f"{question} Run them all? [y/N] ").strip().lower() in ("y", "yes"):
            return
        raise SystemExit(2)
    print(f"sweeper: {question} Add yes=true to run it, or dry_run=true to list the jobs.", file=sys.stderr)
    raise SystemExit(2)


_LOCKS = []


def _lock_sweep(sweep_dir: Path):
    """One sweep at a time per folder: a second one refuses instead of both writing."""
    path = sweep_dir / ".sweep.lock"
    f = open(path, "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "another process"
        print(f"sweeper: another sweep ({holder}) is running into {sweep_dir}; wait for it to end, "
              "or choose another hydra.sweep.dir", file=sys.stderr)
        raise SystemExit(3) from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}")
    f.flush()
    _LOCKS.append(f)  # the lock lives as long as the file stays open
    return f


def _check(jobs: list[Job], gpus_available: float | None = None, conf: dict | None = None) -> None:
    """Stop the sweep with every problem listed, before any job runs (exit code 2)."""
    stop_on_problem(check_sweep, [(j.num, j.overrides, j.spec["config"]) for j in jobs], gpus_available)
    stop_on_problem(check_launcher, conf or {})


def check_launcher(conf: dict) -> None:
    value = conf.get("compile_threads") or "all"
    if value not in ("all", "share"):
        raise SweepConfigError(f"hydra.launcher.compile_threads={value}: one of all, share; no job was run")


def _collect(ref, job: Job, duration: float) -> dict:
    """The job's record in the sweep folder, whatever happened to its worker."""
    import ray

    try:
        result = ray.get(ref)
    except ray.exceptions.RayError as e:
        reason = f"Ray task failed ({type(e).__name__}): {str(e).strip().splitlines()[0][:300]}"
        record = failed_record(job.spec, job.job_dir, reason, duration)
        write_record(job.job_dir, record)
        return record
    unpack(result["bundle"], job.job_dir)
    record = relocate(result["record"], result["scratch"], str(job.job_dir))
    record["job"]["host"] = result["host"]
    record["job"]["ray_node_id"] = result["node_id"]
    write_record(job.job_dir, record)
    return record
