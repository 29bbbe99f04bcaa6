"""A job record's `timings.autotune_store` (sweeper/record.py: the record; docs/result-schema.md:
what each key means), typed: what an autotune=on job took from the autotune store and gave
back, and the stopped runs of it before. Its own module, imported by the job's spec
(sweeper/job_spec.py) and the store's writers, so that neither the record nor the spec
imports the other for it."""

from __future__ import annotations

from typing import TypedDict


class AutotuneStoreInfo(TypedDict, total=False):
    """What an autotune=on job took from the autotune store and gave back, declared once for
    its writers: the job (tasks/job_stores.py, tasks/phases.py),
    the store's reading of a stopped job's file (stores/autotune_store.left_in), the
    launcher (stores/exchange.py, sweep/job_process.py). docs/result-schema.md says what
    each key means."""
    store: str | None
    # what the job started with
    seeded_entries: int
    seeded_ops: int
    seeded_kernel_configs: int
    seeded_kernel_codes: int
    # what it gave
    job_entries: int
    job_ops: int
    job_kernel_configs: int
    partial: bool
    checkpoints: int
    kernel_config_hits: int | None
    # what the driver's store did not have
    new_in_store: int
    new_kernel_configs_in_store: int
    # a job stopped before its compile ended
    stopped_in: str | None
    phase_s_at_last_write: float
    phase_s_at_stop: float
    phase_started_at: float  # taken out again once phase_s_at_stop is known (job_process.failed_record)
    # the stopped runs of this job before this one, oldest first
    earlier_attempts: list[EarlierAttempt]
    notes: list[str]


class EarlierAttempt(TypedDict, total=False):
    """One stopped run of a job (stores/exchange.earlier_attempts): how it ended, what it
    had started with and given, and its log kept as job.attempt<N>.log."""
    status: str | None
    reason: str | None
    duration_s: float | None
    log: str
    job_entries: int
    job_ops: int
    job_kernel_configs: int
    partial: bool
    stopped_in: str | None
    phase_s_at_stop: float
    new_in_store: int
    new_kernel_configs_in_store: int
    seeded_ops: int
    seeded_kernel_configs: int
    kernel_config_hits: int | None
