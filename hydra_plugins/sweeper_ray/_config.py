from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from sweeper.sweep.hydra_callbacks import OUR_LAUNCHER


@dataclass
class RayLauncherConf:
    _target_: str = OUR_LAUNCHER
    # An existing cluster's GCS address ("host:6379", "auto"; ray:// is refused). None: $RAY_ADDRESS if
    # set, else an embedded local Ray sized to this machine.
    address: Optional[str] = None
    # Seconds to wait for Ray's GCS to answer at the address before giving up (exit 2).
    connect_timeout_s: float = 10.0
    # Per job. None: 1 GPU where the cluster has GPUs; on a cluster without GPUs, all the
    # CPUs of a node (compiling and CPU kernels use every core, so CPU jobs run one a node).
    num_gpus_per_job: Optional[float] = None
    num_cpus_per_job: Optional[float] = None
    # Re-run a job whose worker or node died (not one that failed on its own).
    max_retries_on_node_loss: int = 1
    # Node-local folder for job folders and compile caches; results and artifacts come
    # back to the driver's sweep folder through Ray. $SWEEPER_SCRATCH, where set, is the default.
    scratch_dir: str = field(default_factory=lambda: os.environ.get("SWEEPER_SCRATCH") or "/tmp/sweeper-scratch")
    # Skip jobs whose result.json in the sweep folder says ok, for the same job (sweeper/identity.py).
    resume: bool = True
    # Jobs one GPU runs at once (sweeper/sweep/packing.py): each times its GPU under the GPU's
    # lease, one job at a time, and compiles beside the others. "auto": as many as the GPU's
    # memory and the node's cores allow (at most 4, and no more than the sweep's jobs need);
    # 1: one job a GPU, for its whole run.
    jobs_per_gpu: str = "auto"
    # true: while a packed job times a phase that follows the host's launch speed (its eager
    # and compiled steps, its modules), the other jobs of its GPU stand paused (SIGSTOP of
    # their process groups, sweeper/host_pause.py), so that nothing but the holder runs on the
    # host. Off by default: on an H200 it lengthened a packed night from 166 to 185 s, and
    # its launch-bound steps did not read measurably closer to one job a GPU than without
    # it (docs/findings.md, "One GPU kept busy"); the holder's own launch cores are kept
    # from the other jobs either way.
    pause_while_timing: bool = False
    # Inductor compile worker processes per job (TORCHINDUCTOR_COMPILE_THREADS, unless set):
    # "auto" is "all" for a job alone on its GPU and shares the node's cores out between the
    # jobs of a packed GPU; "all" leaves Inductor's default (every core, at most 32) to every
    # job; "share" gives each GPU job its node's cores divided by the jobs running at once.
    compile_threads: str = "auto"
    # When a sweep has more GPUs than jobs left, an autotune=on job takes a share of the GPUs
    # no job will need, for Inductor's multi-GPU autotune benchmarking (sweeper/sweep/spare_gpus.py);
    # only where one node holds the GPUs.
    lend_spare_gpus: bool = True
    # Extra runtime_env for ray.init (e.g. env_vars) when joining a cluster.
    runtime_env: dict[str, Any] = field(default_factory=dict)


# The least value of each numeric setting, and whether the value itself is allowed;
# None (null) is allowed wherever the type is Optional.
LEAST: dict[str, tuple[float, bool]] = {
    "connect_timeout_s": (0, False),
    "num_gpus_per_job": (0, False),
    "num_cpus_per_job": (0, False),
    "max_retries_on_node_loss": (0, True),
}
CHOICES: dict[str, tuple[str, ...]] = {"compile_threads": ("auto", "all", "share")}
_WORDS = {"true": True, "false": False, "on": True, "off": False}


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
        if isinstance(value, bool) or str(value).lower() in _WORDS:
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
        least, allowed = LEAST.get(key, (float("-inf"), True))
        if value < least or (value == least and not allowed):
            return f"{name}={value}: {'at least' if allowed else 'more than'} {least:g}"
    if key in CHOICES and str(value) not in CHOICES[key]:
        return f"{name}={value}: one of {', '.join(CHOICES[key])}"
    if key == "jobs_per_gpu":
        from sweeper.sweep import packing

        try:
            packing.parse_jobs_per_gpu(value)
        except packing.PackingError as e:
            return str(e)
    return None


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
    full = with_defaults(conf)
    if not out and not cluster_address(full):  # a cluster's nodes hold their own scratch folders
        problem = scratch_problem(str(full["scratch_dir"]))
        if problem:
            out.append(problem)
    return out


def with_defaults(conf: dict) -> dict:
    """The launcher's settings with every key present: Hydra's composed config has them
    all; a caller that passes only some (the tests) gets the rest from the dataclass, so
    that each default is declared once, above."""
    from dataclasses import asdict

    defaults = asdict(RayLauncherConf())
    defaults.pop("_target_")
    return {**defaults, **dict(conf)}


def cluster_address(conf: dict) -> str | None:
    """The existing cluster the sweep joins (hydra.launcher.address, else $RAY_ADDRESS);
    None: an embedded local Ray."""
    return with_defaults(conf)["address"] or os.environ.get("RAY_ADDRESS") or None


ConfigStore.instance().store(group="hydra/launcher", name="sweeper_ray", node=RayLauncherConf, provider="sweeper")
