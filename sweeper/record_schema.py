"""The result record's shape (result.json), declared once as types: docs/result-schema.md says
what each field means; sweeper/record.py writes, reads and upgrades it."""

from __future__ import annotations

from typing import Any, TypedDict


# The record's shape, declared once (docs/result-schema.md says what each field means).
# total=False where a field is absent in records written before it existed, or on a CPU.
class Spread(TypedDict, total=False):
    """breakdown.spread(): repeated measurements summarised."""
    median: float
    trimmed_mean: float
    min: float
    max: float
    iqr: float
    range_pct: float
    n: int
    values: list[float]


class Breakdown(TypedDict, total=False):
    """breakdown.breakdown(): where the device time of profiled runs goes."""
    runs: int
    device_ms: float
    kernel_launches: float
    categories: dict[str, dict]
    reference_categories_share_pct: dict[str, float]
    wall_ms: float | None
    busy_ms: float | None
    busy_wall_ms: float | None
    busy_pct: float | None
    busy_pct_uncapped: float | None
    busy_capped: bool
    busy_pct_reference_style: float | None
    busy_pct_profiled_span: float | None
    span_ms: float | None
    kernels: list[dict]


class ModuleEntry(TypedDict, total=False):
    """One compiled module (tasks/modules_profile.py)."""
    label: str
    role: str
    graph_id: int | None
    frame_id: int | None
    frame_compile_id: int | None
    source_path: str
    status: str
    note: str | None
    inputs: str | None
    wall_ms: Spread | None
    wall_ms_pipelined: Spread | None
    launch_us: Spread | None
    warmup_s: float | None
    seconds: float | None
    breakdown: Breakdown | None
    trace: str | None
    artifact: str
    model_code: dict  # where in the model its kernels' time comes from (sweeper/analysis/attribution.py)


class Resolved(TypedDict, total=False):
    """What the job decided where it ran (tasks/phases.py setup and build), beside the
    config it was asked to run: `device` for device=auto, the model's default
    `batch_size` and `image_size` where those were null, the autocast dtype, the compile
    mode and its Inductor options, and how its autotuning and GPU lease were set up."""
    device: str
    batch_size: int
    image_size: int
    amp_dtype: str | None
    compile_mode: str
    inductor_options: dict[str, Any]
    optimizer_step_compiled: bool
    inductor_applied: dict[str, Any]
    autotune_gpus: int | None
    autotune_gpus_given: int
    leased_benchmarks: list[str]
    module_tags: str  # whether the pass naming each kernel's model module ran (tasks/provenance.py)


RESOLVED_KEYS = tuple(Resolved.__annotations__)


# Of those, the config keys (sweeper/sweep/config.py JobConfig) that the job may resolve:
# null or "auto" asked, a value ran (tests/test_record.py checks the list against JobConfig).
ASKED_TOO = ("device", "batch_size", "image_size", "amp_dtype")


class JobInfo(TypedDict, total=False):
    id: str
    dir: str
    overrides: list[str]
    sweeper_version: str
    started_at: str
    finished_at: str
    duration_s: float
    process_s: float
    host: str
    ray_node_id: str
    gpu_ids: list[str] | None
    rerun_alone: str  # why a packed job ran again alone on its GPU
    # with shared storage (hydra.launcher.storage_path): where the job's folder is, its bytes,
    # or why it came back through Ray instead
    stored_at: str
    stored_bytes: int
    storage_note: str
    storage: str  # the storage's URI (credentials never: they are refused), for resume's check of stored_at
    # a task Ray ran again after its worker or node was lost: {"attempt", "why", "host"}
    retried: dict[str, Any]
    # bytes through the driver: the spec out to the job's worker, what came back from it
    driver_bytes: dict[str, int | None]


class Record(TypedDict, total=False):
    """result.json: written by the job (tasks/job.py) or its launcher
    (sweeper/sweep/job_process.failed_record), read by every report."""
    schema_version: int
    status: str  # one of STATUSES
    reason: str | None
    phase: str
    log_tail: str
    log_note: str  # where the log is, when the launcher could not bring it back
    job: JobInfo
    config: dict[str, Any]  # the job's spec as asked (sweeper/sweep/config.py), untouched
    resolved: Resolved  # what the job decided where it ran; {} until it set up
    environment: dict[str, Any] | None
    timings: dict[str, Any]
    step: Breakdown | None
    modules: list[ModuleEntry]
    kernel_table: dict[str, Any] | None
    # the step's kernel time by model module and source line, and what the step compiled
    # into (tasks/phases_profile.profile_step; absent in records written before it)
    model_code: dict[str, Any]
    # the compiled step against eager (tasks/accuracy.py; absent in records written before it)
    accuracy: dict[str, Any]
    # the step's launch sites against the device's roofs (sweeper/analysis/roofline.py; absent before it)
    roofline: dict[str, Any]
    # an autotune=on job's own max-autotune decisions against their noise (sweeper/analysis/autotune_decisions.py)
    autotune_decisions: dict[str, Any]
    artifacts: dict[str, Any]
    upgraded_from_schema: int
