"""Ray's part of the launcher: starting or joining Ray, the job on a worker (a child
process, then its folder packed), and the record back in the driver's sweep folder
whatever happened to the worker (_executor.py hands these to the scheduler)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import signal
import sys
from pathlib import Path

from hydra_plugins.sweeper_ray import ray_internals
from hydra_plugins.sweeper_ray._address import check_ray_address
from hydra_plugins.sweeper_ray._node import lease_spec, set_compile_threads
from hydra_plugins.sweeper_ray._reaper import watch_embedded_ray
from sweeper.job_spec import JobSpec
from sweeper.record import write_record
from sweeper.stores import compile_store
from sweeper.sweep.settings import LauncherSettings, settings_of
from sweeper.sweep.validate import SweepConfigError, stop_on_problem

_REPO_ROOT = Path(__file__).resolve().parents[2]


def init_ray(conf: LauncherSettings | dict) -> str:
    conf = settings_of(conf)
    address = conf.cluster_address
    if not address:
        _loopback_only()
    import ray

    if ray.is_initialized():
        return "already initialized"
    _plain_logs()
    if address:
        # An existing cluster: ask it for nothing (resources, dashboard) at init. A wrong
        # address would keep ray.init retrying or hanging for minutes: check it in seconds.
        stop_on_problem(check_ray_address, address, conf.connect_timeout_s)
        stop_on_problem(_join, address, dict(conf.runtime_env) or None)
        return f"joined Ray cluster at {address}"
    # Workers inherit the driver's environment. PYTHONPATH goes there, not into a
    # runtime_env: Ray prestarts idle workers only for the default environment, and a
    # fresh worker per job (max_calls=1) then starts in about 0.5 s instead of 0.9 s
    # (2-core CPU machine, bench/results/ray_overhead_cpu.md).
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if str(_REPO_ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO_ROOT), *paths]))
    _quiet_start()
    # Watched from before ray.init: a driver killed outright, or stopped while Ray starts,
    # leaves no Ray process behind (_reaper.py).
    watch_embedded_ray()
    # "local": a new Ray of this sweep's own. With no address, ray.init joins the cluster
    # that `ray start` last wrote down on this machine (/tmp/ray/ray_current_cluster), with
    # its exposure and its token, or retries for minutes one that has since stopped.
    try:
        ray.init(address="local", include_dashboard=False)
    except SystemExit as e:  # Ray's own SIGTERM handler, set during init, exits with the signal's number
        if e.code == signal.SIGTERM:
            raise KeyboardInterrupt("SIGTERM while Ray started") from None
        raise
    # ray.init leaves a native SIGTERM handler of the driver's core worker that aborts the
    # process (exit 134): the sweep's own goes back at once, so that only a SIGTERM in the
    # last moments of ray.init itself meets it (docs/reliability.md)
    from sweeper.sweep.control import sigterm_as_interrupt

    sigterm_as_interrupt()
    return f"started an embedded local Ray on 127.0.0.1 (no dashboard, {token_auth_state()})"


def _quiet_start() -> None:
    """What Ray prints that a sweep's user should not read: with RAY_AUTH_MODE unset,
    Ray 2.60 turns token authentication on and says "Set RAY_AUTH_MODE=disabled to opt
    out", an invitation to weaken what this launcher keeps on; setting the mode to token
    explicitly, as Ray's own default does, keeps it on without the hint (and the colour
    codes and de-duplication notices of the job lines: _plain_logs)."""
    if "RAY_AUTH_MODE" not in os.environ:
        try:
            ray_internals.enable_token_auth()  # RAY_AUTH_MODE=token, and Ray's cached config told
        except ImportError:  # another Ray version: its own default stands
            pass


def _plain_logs() -> None:
    """The job lines the driver relays, as a log file reads them, embedded or on a cluster:
    without colour codes around their prefix where stdout is no terminal
    (RAY_COLOR_PREFIX=0), and without Ray's de-duplication, which folds identical lines of
    different jobs into "[repeated Nx across cluster]" notices (RAY_DEDUP_LOGS=0)."""
    if not sys.stdout.isatty():
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")


def _join(address: str, runtime_env: dict | None) -> None:
    import ray

    try:
        ray.init(address=address, runtime_env=runtime_env)
    except Exception as e:  # a cluster that answered the check but refused this driver
        message = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise SweepConfigError(f"joining the Ray cluster at {address} failed: {type(e).__name__}: {message}; "
                               "check hydra.launcher.address / RAY_ADDRESS and that this Ray version "
                               "matches the cluster's") from None


def token_auth_state() -> str:
    """What Ray says of its token authentication, as it is: Ray 2.60 turns it on for a local
    cluster unless RAY_AUTH_MODE turns it off, which is worth a warning."""
    try:
        enabled = ray_internals.token_auth_enabled()
    except ImportError:  # another Ray version: say so rather than claim either way
        return "token authentication: unknown with this Ray version"
    if enabled:
        return "token authentication on"
    print("sweeper: warning: Ray's token authentication is off (RAY_AUTH_MODE="
          f"{os.environ.get('RAY_AUTH_MODE', 'unset')}); any local process can submit work to this Ray",
          file=sys.stderr, flush=True)
    return "token authentication OFF"


def _loopback_only() -> None:
    """Keep an embedded Ray off the network. Passing 127.0.0.1 as the node address does not
    do it: Ray 2.60 swaps it for the machine's reachable address
    (services.resolve_ip_for_localhost), and its GCS, raylet and workers then listen on
    every interface. Its local-only mode (the default on macOS and Windows) does:
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes the node address 127.0.0.1 and every Ray
    process listen there (tests/test_ray_launcher.py). Ray reads the variable when it is
    imported, and its processes inherit it from here."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_internals.local_only_after_import()  # ray was imported before this (e.g. in a test): its copy too


def scratch_key(sweep_dir: Path) -> str:
    return f"{sweep_dir.name}-{hashlib.sha1(str(sweep_dir).encode()).hexdigest()[:8]}"


STORAGE_TOKEN = ".storage_key"  # in the sweep folder: the token of its folder in shared storage


def storage_key(sweep_dir: Path) -> str:
    """The run's own folder under the storage's sweeps/: the sweep folder's name and a token
    the sweep folder keeps. A resume of the folder keeps its token (its jobs' artifacts stay
    together); a sweep folder of the same path on another machine, or made anew, gets its
    own, so two drivers with the recipe's /shared/nightly/$(date +%F) never write one
    storage folder (the path alone made one key for both: one run's traces and logs
    overwritten, its records pointing at the other's)."""
    import uuid

    token_file = Path(sweep_dir) / STORAGE_TOKEN
    try:
        token = token_file.read_text().strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = uuid.uuid4().hex[:12]
        Path(sweep_dir).mkdir(parents=True, exist_ok=True)
        token_file.write_text(token + "\n")
    return f"{Path(sweep_dir).name}-{token}"


def run_in_worker(spec: JobSpec, scratch_job_dir: str, timeout_s: float | None,
                  compile_threads: str = "all", jobs_per_gpu: int = 1, pause_while_timing: bool = False,
                  storage: str | None = None, stored_at: str | None = None) -> dict:
    """Runs on a Ray worker: the job in a child process, then its folder as a bundle, or,
    with shared storage, written to `stored_at` there (_results.py)."""
    import socket

    import ray

    from hydra_plugins.sweeper_ray import _results
    from sweeper.sweep.job_process import progress_printer, run_job_process

    lease = lease_spec(jobs_per_gpu, pause_while_timing)
    set_compile_threads(compile_threads, lease)

    job_dir = Path(scratch_job_dir)
    node_stores = job_dir.parents[1] / "stores"  # this node's copy of the storage's store entries
    if job_dir.exists():  # an earlier attempt: keep its compile cache, drop the rest
        for p in job_dir.iterdir():
            if p.name != "cache":
                shutil.rmtree(p) if p.is_dir() else p.unlink()
    # the node's part of the spec, added in one step: its GPU's lease and, with shared
    # storage, the node's copy of the stored compile
    seed = compile_store.fetch(spec.compile_seed, node_stores) if storage else spec.compile_seed
    spec = dataclasses.replace(spec, gpu_lease=lease, compile_seed=seed)
    attempt = _attempt()
    if attempt:  # said on the terminal as it starts, and in the record
        print(f"[job {spec.job_id}] runs again (attempt {attempt + 1}): its worker or node was lost, and Ray ran its "
              "task again (hydra.launcher.max_retries_on_node_loss)", flush=True)
    record = run_job_process(spec, job_dir, timeout_s, progress_printer(spec.job_id))
    if attempt:
        again = {"attempt": attempt + 1, "why": "its Ray worker or node was lost while it ran: Ray ran its task again "
                                                "(hydra.launcher.max_retries_on_node_loss), from the start",
                 "host": socket.gethostname()}
        record.setdefault("job", {})["retried"] = again
        write_record(job_dir, record)
        said_in_log(job_dir / "job.log", f"[sweeper] attempt {again['attempt']} on {again['host']}: {again['why']}; "
                                         "this log is that attempt's")
    where = {"scratch": str(job_dir), "host": socket.gethostname(), "node_id": ray.get_runtime_context().get_node_id(),
             "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
    if storage and stored_at:
        return _results.to_storage(record, job_dir, spec.config, storage, stored_at, node_stores, where)
    # the scratch folder stays until the driver has written the bundle into the sweep folder
    # (discard_scratch): a driver that cannot (a full disk) names it as where the results are
    return {"record": record, "bundle": _results.pack(job_dir), **where}


def said_in_log(log: Path, line: str) -> None:
    """`line` first in the job's log (the job process wrote the log afresh), so that whoever
    opens it reads before anything else that the job ran again."""
    try:
        body = log.read_bytes() if log.is_file() else b""
        tmp = log.with_name(f".{log.name}.again")
        tmp.write_bytes(line.encode() + b"\n" + body)
        os.replace(tmp, log)
    except OSError:  # the record says it anyway
        pass


def _attempt() -> int:
    """This task's attempt (0: the first), where Ray can say; 0 where it cannot."""
    try:
        return ray_internals.task_attempt()
    except (AttributeError, ImportError, TypeError, ValueError):
        return 0


def check_on_nodes(envs: dict[str, str], need_triton: bool) -> tuple[dict[str, dict], list[str]]:
    """The same check on every alive node of the joined Ray cluster (a task pinned to each)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from sweeper.sweep.pythons import probe, problem

    remote = ray.remote(num_cpus=0)(probe)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    refs = {(name, n["NodeID"], n.get("NodeManagerAddress")): remote.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(exe)
        for name, exe in envs.items() for n in nodes}
    infos: dict[str, dict] = {}
    problems: list[str] = []
    for (name, _, address), ref in refs.items():
        info = ray.get(ref)
        infos.setdefault(name, info)
        p = problem(name, info, need_triton)
        if p:
            problems.append(f"on node {address}: {p}")
    return infos, problems
