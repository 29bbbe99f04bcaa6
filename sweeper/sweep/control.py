"""The sweep logic a launcher needs besides running jobs: each job's spec from Hydra's
composed config, the checks before any job starts, the dry run, the confirmation of a
large sweep, one sweep at a time per folder, and which finished jobs a re-run keeps.
The Ray launcher (hydra_plugins/sweeper_ray) runs jobs with these.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

from hydra.core.utils import filter_overrides
from omegaconf import DictConfig, OmegaConf, open_dict

from sweeper.identity import compile_overrides, identity_overrides
from sweeper.autotune_info import EarlierAttempt
from sweeper.job_spec import AutotuneSeed, JobSpec, StoredCompile
from sweeper.record import Record, RecordError, read_record
from sweeper.sweep.validate import check_sweep, stop_on_problem
from sweeper.words import count

log = logging.getLogger(__name__)


@dataclass
class Job:
    num: int
    overrides: list[str]
    config: DictConfig  # with its hydra node
    job_dir: Path  # in the driver's sweep folder
    spec: JobSpec  # what the job is (job_spec): the config the sweep composed for it, never replaced
    # what the driver decides before the job starts: its interpreter (config key `python`,
    # pythons.assign_interpreters) and the runs of it that stopped before (the launcher's resume)
    python_executable: str | None = None
    earlier_attempts: list[EarlierAttempt] | None = None

    @property
    def name(self) -> str:
        return " ".join(filter_overrides(self.overrides)) or "defaults"


def launch_spec(job: Job, autotune_seed: AutotuneSeed | None = None, compile_seed: StoredCompile | None = None,
                autotune_gpus: int | None = None) -> JobSpec:
    """The spec a job goes out with, built here and only here: what it is, what the driver
    decided for it, and, as it starts, the stores' entries for it (stores/exchange.seeds)
    and the spare GPUs lent for its autotuning. A record the launcher writes for a job that
    never wrote its own (cancelled, its worker lost) is made from it too."""
    return JobSpec(job.spec.job_id, job.spec.overrides, job.spec.config, python_executable=job.python_executable,
                   earlier_attempts=job.earlier_attempts, autotune_seed=autotune_seed, compile_seed=compile_seed,
                   autotune_gpus=autotune_gpus)


def make_jobs(launcher, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Job]:
    jobs = []
    for i, overrides in enumerate(job_overrides):
        num = initial_job_idx + i
        cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
        with open_dict(cfg):
            cfg.hydra.job.id = num
            cfg.hydra.job.num = num
        job_dir = Path(str(cfg.hydra.sweep.dir)).resolve() / str(cfg.hydra.sweep.subdir)
        task_keys = [k for k in cfg.keys() if k != "hydra"]
        jobs.append(Job(num, list(overrides), cfg, job_dir, job_spec(num, overrides,
                                                                  OmegaConf.masked_copy(cfg, task_keys))))
    return jobs


def job_spec(num: int, overrides: Sequence[str], cfg: DictConfig) -> JobSpec:
    """What a job process reads (job.json), from the job's composed config (its hydra node
    left out)."""
    config = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert isinstance(config, dict)
    return JobSpec(job_id=str(num), overrides=tuple(overrides), config={str(k): v for k, v in config.items()})


def save_hydra_files(job: Job) -> None:
    d = job.job_dir / ".hydra"
    d.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create(job.spec.config), d / "config.yaml")
    OmegaConf.save(OmegaConf.create(job.overrides), d / "overrides.yaml")


def reusable(job: Job, storage_missing=None) -> Record | None:
    """The ok record of the same job in its folder (resume keeps it), or None (it runs
    again). `storage_missing(record)`: why a record's artifacts kept in shared storage are
    no longer there, or None; such a job runs again, and the log says why."""
    try:
        record = read_record(job.job_dir)
    except RecordError as e:
        if (job.job_dir / "result.json").exists():
            log.warning(f"#{job.num}: {e}: running the job again")
        return None
    then = list(record["job"].get("overrides", []))
    if record["status"] == "ok" and sorted(identity_overrides(then)) == sorted(identity_overrides(job.overrides)):
        gone = storage_missing(record) if storage_missing is not None else None
        if gone:
            log.warning(f"#{job.num}: {gone}: running the job again")
            return None
        return record  # the same job (sweeper/identity.py), whatever its store, cache or time limit
    return None


def stored_artifacts_missing(record: Record) -> str | None:
    """Why a record's folder in shared storage (`job.stored_at`) is gone, or None: its log
    must still be where the record says (a bucket emptied, a folder removed); a record
    without storage, or whose storage cannot be asked, is taken as it is."""
    from sweeper.stores.storage import Storage, StorageError, relative_to

    where = (record.get("job") or {}).get("stored_at")
    storage_uri = (record.get("job") or {}).get("storage")
    if not where or not storage_uri:
        return None
    try:
        storage = Storage(storage_uri)
        rel = relative_to(storage, where)
        if rel is None:
            return None
        if storage.stat(f"{rel}/job.log") is None and storage.stat(f"{rel}/result.json") is None:
            return f"its folder in shared storage ({where}) is gone"
    except (OSError, StorageError, ValueError) as e:
        return f"its folder in shared storage ({where}) cannot be read ({type(e).__name__}: {e})"
    return None


def earlier_record(job: Job) -> Record | None:
    """The record a stopped earlier run of this job left in its folder (any status), if it
    was the same compile (sweeper/identity.py: but for how it is measured or run, such as
    its time limit, a fault or the store folders); else None."""
    try:
        record = read_record(job.job_dir)
    except RecordError:
        return None
    then = list(record["job"].get("overrides", []))
    return record if sorted(compile_overrides(then)) == sorted(compile_overrides(job.overrides)) else None


def keep_earlier_log(job: Job) -> str | None:
    """Before a stopped job runs again into its folder: its log moved aside as
    job.attempt<N>.log (N counting from 1), so that the new run's log does not replace it;
    that name, or None when there was no log."""
    log = job.job_dir / "job.log"
    if not log.is_file():
        return None
    n = 1 + len(list(job.job_dir.glob("job.attempt*.log")))
    kept = job.job_dir / f"job.attempt{n}.log"
    log.rename(kept)
    return kept.name


def dry_run(jobs: list[Job], sweep_dir: Path, gpus: int | None = None) -> bool:
    """With dry_run=true: list the jobs, each with the device and batch size it will run
    with on a machine of `gpus` GPUs (None: not known, a cluster) and whether it would be
    skipped there, and say so (True); the sweep then runs none."""
    from sweeper.sweep.machine import job_line, resolved

    if not (jobs and jobs[0].spec.config["dry_run"]):
        return False
    skipped = sum(1 for j in jobs if resolved(j.spec.config, gpus)["skipped"])
    print(f"dry run: {count(len(jobs), 'job')} into {sweep_dir}" + (f" ({skipped} would be skipped here)" if skipped else "")
          + "; none started")
    for j in jobs:
        print(f"  #{j.num} {' '.join(o for o in j.overrides if not o.startswith('dry_run=')) or '(the defaults)'}")
        print(f"       {job_line(j.spec.config, gpus)}")
    return True


_CONFIRMED: set[int] = set()  # sweep sizes the user said yes to in this process (asked once)


def confirm(n: int, cfg: dict) -> None:
    if not cfg:  # no job at all
        return
    limit = cfg["confirm_above"]
    if n <= limit or cfg["yes"] or n in _CONFIRMED:
        return
    question = f"This sweep has {count(n, 'job')} (more than confirm_above={limit})."
    if sys.stdin is not None and sys.stdin.isatty():
        if input(f"{question} Run them all? [y/N] ").strip().lower() in ("y", "yes"):
            _CONFIRMED.add(n)
            return
        raise SystemExit(2)
    print(f"sweeper: {question} Add yes=true to run it, or dry_run=true to list the jobs.", file=sys.stderr)
    raise SystemExit(2)


def grid_size(overrides: Sequence[str]) -> int | None:
    """The number of jobs the command line's overrides sweep (the product of each swept
    key's values), counted before Hydra builds each job's config, which for a 200-job grid
    took 25 s; None where a sweep cannot be counted without Hydra (a glob over a group)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    n = 1
    try:
        for o in OverridesParser.create().parse_overrides(list(overrides)):
            if o.is_sweep_override() and not o.is_hydra_override():
                n *= len(list(o.sweep_string_iterator()))
    except Exception:  # noqa: BLE001 - Hydra's own parse says what is wrong, later
        return None
    return n


_LOCKS: dict[str, IO] = {}  # sweep folder -> its open lock file: held while the process lives
_NEW_FOLDERS: dict[str, list[Path]] = {}  # sweep folder -> the folders this process made for it
_HYDRA_ONLY = {"multirun.yaml", ".sweep.lock"}  # what a sweep folder holds before its first job


def note_new_folders(sweep_dir: Path) -> None:
    """Before anything creates the sweep folder: which of its folders do not exist yet, so
    that a refused or dry-run sweep takes them away again (discard_unused_sweep_dir)."""
    path = Path(sweep_dir).resolve()
    new = []
    while not path.exists():
        new.append(path)
        path = path.parent
    _NEW_FOLDERS.setdefault(str(Path(sweep_dir).resolve()), new)


def discard_unused_sweep_dir(sweep_dir: Path) -> None:
    """A sweep that ran no job (refused, a dry run) leaves no empty outputs/DATE/TIME
    behind: the folders this process made are removed, with Hydra's multirun.yaml and the
    lock, when they hold nothing else. A folder that existed before is left as it was."""
    key = str(Path(sweep_dir).resolve())
    folder, made = Path(key), _NEW_FOLDERS.get(key)
    if not made or not folder.is_dir() or {p.name for p in folder.iterdir()} - _HYDRA_ONLY:
        return
    lock = _LOCKS.pop(key, None)
    if lock is not None:
        lock.close()
    for name in _HYDRA_ONLY:
        (folder / name).unlink(missing_ok=True)
    for path in made:  # innermost first; a parent that holds other sweeps stays
        try:
            path.rmdir()
        except OSError:
            break


def lock_sweep(sweep_dir: Path):
    """One sweep at a time per folder: a second one refuses instead of both writing. Taken
    before Hydra writes anything into the folder (sweeper/sweep/hydra_callbacks.py), and
    again by the launcher, which finds it held by this process already."""
    key = str(Path(sweep_dir).resolve())
    if key in _LOCKS:
        return _LOCKS[key]
    path = Path(sweep_dir) / ".sweep.lock"
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
    _LOCKS[key] = f  # the lock lives as long as the file stays open
    return f


def sigterm_as_interrupt() -> None:
    """SIGTERM (a scheduler, `kill`) ends the sweep as Ctrl-C does: running jobs cancelled,
    finished ones kept, summary.json saying what was running. Set again after ray.init,
    whose own handler exits at once."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


def check_jobs(jobs: list[Job], gpus_available: float | None = None) -> None:
    """Stop the sweep with every problem listed, before any job runs (exit code 2)."""
    stop_on_problem(check_sweep, [(j.num, j.overrides, j.spec.config) for j in jobs], gpus_available)
