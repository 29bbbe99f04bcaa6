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
from sweeper.record import regular_bytes
from sweeper.reporting.load import LoadedSweep, read_sweep, summary_problem


def read_summary(sweep: Path) -> dict | str:
    """A sweep folder's summary.json, or why it cannot be read."""
    try:
        summary = json.loads(regular_bytes(Path(sweep) / "summary.json"))
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


MANIFEST_KEY = b"sweeper.records"  # the tables' own metadata: which records they were made from


def records_manifest(sweep: Path) -> str:
    """Which files a sweep's tables are made from, as JSON: summary.json and each job's
    result.json with its size, modification time (ns) and inode. A record copied in with
    an older time (`cp -p`), touched, or tables copied from another sweep no longer match:
    modification times alone let both through."""
    sweep = Path(sweep)
    files = [sweep / "summary.json"] + sorted(sweep.glob("*/result.json"))
    out = {}
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        out[f.relative_to(sweep).as_posix()] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return json.dumps(out, sort_keys=True)


def write_table(df: pd.DataFrame, path: Path, manifest: str) -> None:
    """A table as Parquet, carrying `manifest` (records_manifest) in its own metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), MANIFEST_KEY: manifest.encode()})
    pq.write_table(table, path)


def _made_from(path: Path) -> str | None:
    import pyarrow.parquet as pq

    meta = pq.read_schema(path).metadata or {}
    got = meta.get(MANIFEST_KEY)
    return got.decode() if got else None


# Columns the comparisons compute with: a table whose values there are not numbers (a
# jobs.parquet written by hand) is not the aggregate's, and the records are read instead.
_NUMERIC = ("job", "device_ms", "compiled_step_ms", "busy_pct", "kernel_launches")


def _from_parquet(sweep: Path, kernels: bool = True) -> SweepTables | None:
    """The sweep's tables as its aggregate wrote them, where they say they were made from
    the records and summary.json as they are now (the same sizes, modification times and
    files: records_manifest; else a resume, a re-run or a copy changed them since, or the
    tables came from another sweep) and hold every column this version reads, of the
    right types; None otherwise."""
    tdir = Path(sweep) / "tables"
    jobs_path, kernels_path = tdir / "jobs.parquet", tdir / "kernels.parquet"
    try:
        now = records_manifest(Path(sweep))
        if _made_from(jobs_path) != now or (kernels and _made_from(kernels_path) != now):
            return None
    except (OSError, ValueError, ArrowException):
        return None
    try:
        jobs = pd.read_parquet(jobs_path)
        if not set(tables.JOB_COLUMNS) <= set(jobs.columns):  # written by an older sweeper
            return None
        if not all(pd.api.types.is_numeric_dtype(jobs[c]) or jobs[c].isna().all() for c in _NUMERIC if c in jobs):
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
