"""The launcher's settings (hydra.launcher.*), typed and resolved once: the Hydra plugin
registers them as its structured config (hydra_plugins/sweeper_ray/_config.py adds Hydra's
`_target_`), checks the values the user gave (setting_problem there), then hands the
scheduler and the executor one `LauncherSettings` (settings_of). Pure: no Hydra, no Ray."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

WORDS = {"true": True, "false": False, "on": True, "off": False}


@dataclass
class LauncherSettings:
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
    # Where workers keep each job's artifacts (traces, module copies, tables, log) and the
    # compile store, so that they never pass through the driver: a folder every node sees
    # at the same path (NFS), or object storage by URI (s3://bucket/prefix, gs://...; an
    # S3-compatible server: s3://bucket/prefix?endpoint_override=host:port&scheme=http),
    # read with pyarrow's filesystems and the nodes' own credentials. Only each job's
    # record comes back to the driver's sweep folder, its artifact paths pointing here.
    # None: the driver's disk, everything back through Ray as one bundle a job (docs/running.md).
    storage_path: Optional[str] = None
    # Extra runtime_env for ray.init (e.g. env_vars) when joining a cluster.
    runtime_env: dict[str, Any] = field(default_factory=dict)

    @property
    def cluster_address(self) -> str | None:
        """The existing cluster the sweep joins (address, else $RAY_ADDRESS); None: an
        embedded local Ray."""
        return self.address or os.environ.get("RAY_ADDRESS") or None


def settings_of(conf: Mapping[str, Any] | LauncherSettings | None = None) -> LauncherSettings:
    """The settings with every default filled and each value of its declared type, from
    Hydra's composed launcher config (whose values setting_problem has checked) or from the
    few keys a test or bench passes. `_target_` and keys of no setting are left out."""
    if isinstance(conf, LauncherSettings):
        return conf
    given = dict(conf or {})
    out: dict[str, Any] = {}
    for f in dataclasses.fields(LauncherSettings):
        if f.name not in given:
            continue
        value = given[f.name]
        default = getattr(LauncherSettings(), f.name)
        if isinstance(value, str) and value.lower() in ("null", "none") and f.name != "jobs_per_gpu":
            value = None
        elif isinstance(default, bool) and isinstance(value, str):
            value = WORDS[value.lower()]
        elif isinstance(default, (int, float)) and not isinstance(default, bool) and isinstance(value, str):
            value = type(default)(value)
        elif f.name in ("num_gpus_per_job", "num_cpus_per_job") and isinstance(value, str):
            value = float(value)
        elif f.name == "runtime_env":
            value = dict(value or {})
        out[f.name] = value
    return LauncherSettings(**out)
