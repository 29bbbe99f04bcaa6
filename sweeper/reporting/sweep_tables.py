"""A finished sweep's tables as the comparisons read them (sweeper/reporting/sweeps.py): from
its tables/*.parquet while those are current, else from its records; a job whose record
cannot be read kept as a row that says so."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pyarrow.lib import ArrowException

from sweeper.reporting import tables
from sweeper.reporting.load import LoadedSweep, read_sweep, summary_problem


def read_summary(sweep: Path) -> dict | str:
    """A sweep folder's summary.json, or why it cannot be read."""
    try:
        summary = json.loads((Path(sweep) / "summary.json").read_text())
    except (OSError, ValueError) as e:
        return f"its summary.json cannot be read ({e})"
    problem = summary_problem(summary)
    return f"its summary.json {problem}" if problem else summary


def started_at(sweep: Path) -> str:
    summary = read_summary(sweep)
    return "" if isinstance(summary, str) else summary.get("started_at") or ""


@dataclass
class SweepTables:
    path: Path
    jobs: pd.DataFrame
    kernels: pd.DataFrame  # the step's kernels (scope "step") at least
    started_at: str = ""
    source: str = "records"  # where the tables came from: "records" or "tables" (its Parquet files)
    unreadable: dict[int, str] = field(default_factory=dict)  # job number -> why its record could not be read
    overrides: dict[int, tuple] = field(default_factory=dict)  # job number -> its overrides (summary.json)
    _by_job: dict | None = field(default=None, repr=False)

    def kernels_of(self, job: int) -> pd.DataFrame:
        """One job's kernel rows (grouped once: a compare of 1,000 jobs looks up each)."""
        if self._by_job is None:
            self._by_job = {j: g for j, g in self.kernels.groupby("job", sort=False)}
        return self._by_job.get(job, self.kernels.iloc[0:0])


# what a comparison reads of the kernels table: the step's kernels only
_KERNEL_READ = ["job", "label", "scope", "kernel", "category", "device_ms", "count", "share_pct", "source",
                "model_modules"]


def _from_parquet(sweep: Path, kernels: bool = True) -> SweepTables | None:
    """The sweep's tables as its aggregate wrote them, where they are at least as new as
    summary.json and every result.json (else a resume or a re-run changed the records
    since) and hold every column this version reads; None otherwise."""
    tdir = Path(sweep) / "tables"
    jobs_path, kernels_path = tdir / "jobs.parquet", tdir / "kernels.parquet"
    try:
        written = min(jobs_path.stat().st_mtime, kernels_path.stat().st_mtime)
        newest = max([(Path(sweep) / "summary.json").stat().st_mtime]
                     + [p.stat().st_mtime for p in Path(sweep).glob("*/result.json")])
    except OSError:
        return None
    if written < newest:
        return None
    try:
        jobs = pd.read_parquet(jobs_path)
        if not set(tables.JOB_COLUMNS) <= set(jobs.columns):  # written by an older sweeper
            return None
        overrides = _overrides(sweep)
        if overrides and set(jobs["job"]) != set(overrides):  # a job its aggregate left out: the records say why
            return None
        step = _step_kernels(kernels_path) if kernels else pd.DataFrame(columns=_KERNEL_READ)
    except (OSError, ValueError, KeyError, ArrowException):  # unreadable or of another shape: the records decide
        return None
    return SweepTables(Path(sweep), jobs, step, started_at(sweep), source="tables", overrides=overrides)


def _overrides(sweep: Path) -> dict[int, tuple]:
    """Job number -> its overrides, from the sweep's summary.json (empty if unreadable)."""
    summary = read_summary(sweep)
    return {} if isinstance(summary, str) else _overrides_of(summary)


def _overrides_of(summary: dict) -> dict[int, tuple]:
    return {j["num"]: tuple(j.get("overrides") or []) for j in summary.get("jobs") or []}


def _step_kernels(path: Path) -> pd.DataFrame:
    """The step's rows of a kernels.parquet. Its strings read dictionary-encoded, each name
    once, then as the tables hold them: a 1,000-job table's names read as 270,000 strings
    took 170 MB more at their peak than this."""
    import pyarrow.parquet as pq

    names = ["label", "scope", "kernel", "category", "source", "model_modules"]
    table = pq.read_table(path, columns=_KERNEL_READ, filters=[("scope", "==", "step")], read_dictionary=names)
    kernels = table.to_pandas(split_blocks=True, self_destruct=True)
    del table
    for c in names:
        kernels[c] = kernels[c].astype(object)
    return kernels


def sweep_tables(sweep: Path) -> SweepTables:
    """An earlier sweep's jobs and kernels: from its Parquet tables where they are current
    (_from_parquet), else from its records."""
    found = _from_parquet(Path(sweep))
    if found is not None:
        return found
    return loaded_tables(read_sweep(Path(sweep)))


def history_tables(sweep: Path) -> SweepTables:
    """An earlier sweep's jobs alone, as the history's noise reads them (no kernels)."""
    found = _from_parquet(Path(sweep), kernels=False)
    if found is not None:
        return found
    return loaded_tables(read_sweep(Path(sweep)))


def loaded_tables(sweep: LoadedSweep) -> SweepTables:
    """The SweepTables of a sweep already read (the aggregate's own)."""
    return SweepTables(sweep.path, sweep.jobs, sweep.kernels, sweep.started_at, unreadable=dict(sweep.unreadable),
                       overrides=_overrides_of(sweep.summary))


UNREADABLE = "unreadable"  # the status of a job whose result.json could not be read


def with_unreadable(t: SweepTables, other: SweepTables) -> SweepTables:
    """`t` with a row for each job whose record could not be read, status UNREADABLE and
    the reason (naming the file), keyed as the job of `other` that ran the same overrides
    (summary.json), so that a compare sees a changed status, not a job gone or new."""
    if not t.unreadable:
        return t
    by_overrides = {o: n for n, o in other.overrides.items()}
    other_jobs = other.jobs.set_index("job")
    rows = []
    for num, why in sorted(t.unreadable.items()):
        twin = by_overrides.get(t.overrides.get(num, ()))
        if twin is not None and twin in other_jobs.index:
            key, label = other_jobs.at[twin, "key"], other_jobs.at[twin, "label"]
        else:
            key, label = f"unreadable #{num}", f"#{num} {' '.join(t.overrides.get(num, ()))}".strip()
        rows.append({"job": num, "key": key, "label": label, "status": UNREADABLE, "reason": why})
    jobs = pd.concat([t.jobs, pd.DataFrame(rows).reindex(columns=t.jobs.columns)], ignore_index=True)
    return SweepTables(t.path, jobs, t.kernels, t.started_at, t.source, t.unreadable, t.overrides)
