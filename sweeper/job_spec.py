"""A job's spec: what the driver hands a job process, written as its job.json.

Built in one place as the job starts (sweeper/sweep/control.py, launch_spec): what the job
is (its composed config), what the driver decided for it (its interpreter, the runs of it
that stopped before), the stores' entries for it as they are then (sweeper/stores/
exchange.py) and the spare GPUs lent for its autotuning. Its node adds its own part in one
step (its GPU's lease, its copy of a stored compile: hydra_plugins/sweeper_ray/_ray.py),
and the stored compile's bytes go beside job.json, not in it (compile_store.place_seed).
Frozen: each of those makes a new spec, so that nothing leaks into another job's spec or
into a retried run's. The job process reads it back with `from_json` (tasks/job.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweeper.autotune_info import EarlierAttempt


@dataclass(frozen=True)
class AutotuneSeed:
    """The autotune store's entries the driver hands a job (stores/autotune_store.load): the
    store's folder for one torch version, that version, its documents by Inductor system
    hash (each a GPU's or CPU's timed choices and kernel configs), and notes on files that
    were set aside. The job merges them into its cache before it compiles
    (tasks/job_stores.seed_autotune)."""

    store: str | None = None
    torch: str | None = None
    systems: dict[str, dict] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"store": self.store, "torch": self.torch, "systems": self.systems, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AutotuneSeed:
        return cls(data.get("store"), data.get("torch"), dict(data.get("systems") or {}), tuple(data.get("notes") or ()))


@dataclass(frozen=True)
class StoredCompile:
    """An earlier compile of the job, from the compile store (stores/compile_store.py), as
    it goes out to the job; each step makes a new one. The driver reads it (`data`, `libs`:
    the blob's and a CPU job's kernel libraries' bytes) or, with shared storage, names it
    there (`storage`, `entry`); the job's node reads that entry into its own copy (`path`,
    `libs_path`; `source`: "storage", or "node" where its copy was current, and
    `fetched_bytes`); then the files are placed beside job.json (`file`, `libs_file`: names
    in the job folder) and the spec that goes into job.json carries no bytes. `meta`: the
    stored compile's description (its torch, cold compile time, tuned configs); `notes`:
    why a part of it was not used."""

    store: str | None = None
    torch: str | None = None
    meta: dict | None = None
    notes: tuple[str, ...] = ()
    data: bytes | None = None
    libs: bytes | None = None
    storage: str | None = None
    entry: str | None = None
    path: str | None = None
    libs_path: str | None = None
    source: str | None = None
    fetched_bytes: int = 0
    file: str | None = None
    libs_file: str | None = None

    def noted(self, note: str) -> StoredCompile:
        return dataclasses.replace(self, notes=(*self.notes, note))

    def carried_bytes(self) -> int:
        """The bytes it carries (the driver's read of the store), 0 once placed or named."""
        return len(self.data or b"") + len(self.libs or b"")

    def to_json(self) -> dict[str, Any]:
        """As job.json holds it: no bytes (place_seed has written them beside it)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("data", "libs")}
        out["notes"] = list(self.notes)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StoredCompile:
        known = {f.name for f in dataclasses.fields(cls)} - {"data", "libs"}
        return cls(**{**{k: v for k, v in data.items() if k in known}, "notes": tuple(data.get("notes") or ())})


@dataclass(frozen=True)
class GpuLeaseSpec:
    """What the launcher tells a job of its GPU's lease (tasks/gpu_lease.py), where the GPU
    may be shared: the lease's key (the GPU's UUID where NVML reads it, else its Ray id),
    the jobs the GPU runs at once, the cores the job compiles on and those it adds while it
    holds the lease (None: not packed), and whether it pauses the GPU's other jobs while it
    times a launch-bound phase (pause_while_timing)."""

    key: str
    jobs_per_gpu: int = 1
    cpus_shared: tuple[int, ...] | None = None
    cpus_leased: tuple[int, ...] | None = None
    pause_others: bool = False

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GpuLeaseSpec:
        shared, leased = data.get("cpus_shared"), data.get("cpus_leased")
        return cls(str(data["key"]), int(data.get("jobs_per_gpu") or 1),
                   tuple(shared) if shared is not None else None, tuple(leased) if leased is not None else None,
                   bool(data.get("pause_others")))


@dataclass(frozen=True)
class JobSpec:
    job_id: str  # the job's number in its sweep, as text
    overrides: tuple[str, ...]  # the command line's overrides that made this job
    config: dict[str, Any]  # the composed config, resolved (sweeper/sweep/config.py: JobConfig)
    # The interpreter the job runs under (config key `python`); None: the driver's own.
    python_executable: str | None = None
    # What the stopped runs of this job had tuned (stores/exchange.earlier_attempts).
    earlier_attempts: list[EarlierAttempt] | None = None
    # The autotune store's timings for the job (stores/autotune_store.load).
    autotune_seed: AutotuneSeed | None = None
    # An earlier compile of the same job (stores/compile_store.load; its bytes are placed
    # beside job.json by compile_store.place_seed, and this then names the file).
    compile_seed: StoredCompile | None = None
    # GPUs the job autotunes on, its own one included (sweeper/sweep/spare_gpus.py); None: 1.
    autotune_gpus: int | None = None
    # Its GPU's lease, where the GPU is shared with other jobs (tasks/gpu_lease.py).
    gpu_lease: GpuLeaseSpec | None = None

    def to_json(self) -> dict[str, Any]:
        """The spec as job.json holds it (fields left unset are left out)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["overrides"] = list(self.overrides)
        if self.gpu_lease is not None:
            out["gpu_lease"] = self.gpu_lease.to_json()
        if self.autotune_seed is not None:
            out["autotune_seed"] = self.autotune_seed.to_json()
        if self.compile_seed is not None:
            out["compile_seed"] = self.compile_seed.to_json()
        return {k: v for k, v in out.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobSpec:
        """A spec from job.json; a key this version does not know is an error, not ignored."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"job.json: unknown key(s) {', '.join(unknown)} (written by another sweeper version?)")
        lease, autotune, compiled = data.get("gpu_lease"), data.get("autotune_seed"), data.get("compile_seed")
        return cls(**{**data, "job_id": str(data["job_id"]), "overrides": tuple(data.get("overrides") or ()),
                      "gpu_lease": GpuLeaseSpec.from_json(lease) if lease else None,
                      "autotune_seed": AutotuneSeed.from_json(autotune) if autotune is not None else None,
                      "compile_seed": StoredCompile.from_json(compiled) if compiled is not None else None})
