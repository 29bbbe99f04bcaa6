from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore

from sweeper.sweep.hydra_callbacks import OUR_LAUNCHER
from sweeper.sweep.settings import WORDS, LauncherSettings, settings_of


@dataclass
class RayLauncherConf(LauncherSettings):
    """The settings as Hydra's structured config (sweeper/sweep/settings.py says what each does)."""
    _target_: str = OUR_LAUNCHER


# The least value of each numeric setting, and whether the value itself is allowed;
# None (null) is allowed wherever the type is Optional.
LEAST: dict[str, tuple[float, bool]] = {
    "connect_timeout_s": (0, False),
    "num_gpus_per_job": (0, False),
    "num_cpus_per_job": (0, False),
    "max_retries_on_node_loss": (0, True),
}
CHOICES: dict[str, tuple[str, ...]] = {"compile_threads": ("auto", "all", "share")}


def _setting_types() -> dict[str, Any]:
    import typing
    from dataclasses import fields

    hints = typing.get_type_hints(RayLauncherConf)
    return {f.name: hints[f.name] for f in fields(RayLauncherConf) if f.name != "_target_"}


def setting_problem(key: str, value: Any) -> str | None:
    """What is wrong with hydra.launcher.<key>=<value>: an unknown key (with the closest
    names), a value of the wrong type, below its least value or outside its choices; None
    if nothing. The value as the command line or a composed config holds it."""
    import difflib
    import typing

    types = _setting_types()
    name = f"hydra.launcher.{key}"
    if key not in types:
        close = difflib.get_close_matches(key, list(types), n=3, cutoff=0.5)
        return (f"{name}: no such launcher setting" + (f"; did you mean {', '.join(close)}?" if close else "")
                + f" (the settings: {', '.join(types)}; docs/running.md)")
    tp = types[key]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    nullable = typing.get_origin(tp) is typing.Union and type(None) in typing.get_args(tp)
    plain = args[0] if nullable and len(args) == 1 else tp
    if value is None or (isinstance(value, str) and value.lower() == "null"):
        return None if nullable else f"{name}=null: this setting must have a value"
    if plain is bool:
        if isinstance(value, bool) or str(value).lower() in WORDS:
            return None
        return f"{name}={value}: true or false"
    if plain in (int, float):
        if isinstance(value, str):
            try:
                value = int(value) if plain is int else float(value)
            except ValueError:
                return f"{name}={value}: {'a whole number' if plain is int else 'a number'}"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (plain is int and not isinstance(value, int)):
            return f"{name}={value}: {'a whole number' if plain is int else 'a number'}"
        if value != value:  # nan
            return f"{name}={value}: a number"
        if value in (float("inf"), float("-inf")):  # Ray takes no infinite resource: a traceback once it started
            return f"{name}={value}: a finite number"
        least, allowed = LEAST.get(key, (float("-inf"), True))
        if value < least or (value == least and not allowed):
            return f"{name}={value}: {'at least' if allowed else 'more than'} {least:g}"
    if key == "storage_path" and value:
        from sweeper.stores.storage import credentials_in

        problem = credentials_in(str(value))
        if problem:
            return problem
    if key in CHOICES and str(value) not in CHOICES[key]:
        return f"{name}={value}: one of {', '.join(CHOICES[key])}"
    if key == "jobs_per_gpu":
        from sweeper.sweep import packing

        try:
            packing.parse_jobs_per_gpu(value)
        except packing.PackingError as e:
            return str(e)
    return None


def embedded_resource_problems(full) -> list[str]:
    """A job's resources that the embedded Ray (this machine's CPUs and GPUs) can never give:
    such a job waits forever ("1 running" with nothing running). A cluster's nodes are asked
    once the driver joins it."""
    from sweeper.sweep.machine import nvml_gpus

    out = []
    cpus = os.cpu_count() or 1
    if full.num_cpus_per_job is not None and full.num_cpus_per_job > cpus:
        out.append(f"hydra.launcher.num_cpus_per_job={full.num_cpus_per_job:g}: this machine has {cpus} CPUs, so no "
                   f"job could ever start; give at most {cpus}")
    gpus = nvml_gpus()[0]
    if full.num_gpus_per_job is not None and gpus is not None and full.num_gpus_per_job > max(gpus, 0) \
            and full.num_gpus_per_job > 0:
        out.append(f"hydra.launcher.num_gpus_per_job={full.num_gpus_per_job:g}: this machine has {gpus} GPUs, so no "
                   "job could ever start" + (f"; give at most {gpus}" if gpus else "; give 0 to run on its CPUs"))
    return out


def scratch_problem(path: str) -> str | None:
    """Why the job folders cannot go under scratch_dir on this machine, None if they can:
    made (with its parents) and written to, as each job's folder will be."""
    import tempfile

    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".sweeper-write-check"):
            pass
    except OSError as e:
        return (f"hydra.launcher.scratch_dir={path}: cannot be written ({e.strerror or e}); give a folder this "
                "user can write, e.g. hydra.launcher.scratch_dir=/tmp/sweeper-scratch")
    return None


def settings_problems(conf: dict) -> list[str]:
    """Every problem of a composed launcher config (setting_problem for each key, and on
    this machine, for an embedded Ray, the scratch folder written to)."""
    out = [p for k, v in conf.items() if k != "_target_" and k != "runtime_env"
           for p in [setting_problem(k, v)] if p]
    full = settings_of(conf)
    if not out and not full.cluster_address:  # a cluster's nodes hold their own scratch folders
        problem = scratch_problem(full.scratch_dir)
        if problem:
            out.append(problem)
        out += embedded_resource_problems(full)
    if not out and full.storage_path:  # written and read back from here, before any job runs
        from sweeper.stores.storage import Storage, StorageError

        from sweeper.stores.storage import credentials_in

        try:
            problem = credentials_in(full.storage_path)  # refused before anything is tried, or written
            storage = Storage.of(full.storage_path) if not problem else None
            problem = problem or (storage.problem_within() if storage else None)
        except StorageError as e:
            problem = f"hydra.launcher.{e}; e.g. s3://bucket/prefix or a folder every node sees"
        if problem:
            out.append(problem)
    return out


ConfigStore.instance().store(group="hydra/launcher", name="sweeper_ray", node=RayLauncherConf, provider="sweeper")
