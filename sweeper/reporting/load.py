"""A sweep folder's records, read as every report and comparison reads them (pure, but for
file reads): summary.json when present, else every <job>/result.json. A record that
cannot be read is left out with a note naming it and the fix, never a traceback."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from sweeper.record import Record, RecordError, read_record, regular_bytes, relocate
from sweeper.reporting.tables import (DECISION_COLUMNS, MODEL_MODULE_COLUMNS, RECOVERABLE_COLUMNS, decision_rows,
                                      recoverable_rows)


class AggregateError(ValueError):
    """The folder is not a sweep folder that can be aggregated."""


def summary_problem(summary) -> str | None:
    """Why a parsed summary.json is not one a sweep wrote (valid JSON of another shape:
    `null`, `[]`, `{"jobs": 5}`): "holds list, not an object"; or None."""
    if not isinstance(summary, dict):
        return f"holds {type(summary).__name__}, not an object"
    if not isinstance(summary.get("jobs", []), list) or not all(isinstance(j, dict) for j in summary.get("jobs") or []):
        return "holds `jobs` that is not a list of jobs"
    for j in summary.get("jobs") or []:  # each job as a sweep writes it: its number and folder
        if not isinstance(j.get("num"), int) or isinstance(j.get("num"), bool) or not isinstance(j.get("dir"), str):
            return f"holds a job entry without a job number and folder ({str(j)[:80]})"
        if not isinstance(j.get("overrides", []), list):
            return f"holds a job entry whose overrides are not a list ({str(j)[:80]})"
    if not isinstance(summary.get("counts") or {}, dict):
        return "holds `counts` that is not an object"
    return None


def _job_dirs(sweep_dir: Path) -> tuple[dict, dict[int, Path], list[str]]:
    """(summary, job number -> job folder, notes): the summary's jobs, else every
    <n>/result.json of the folder."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise AggregateError(f"no sweep folder at {sweep_dir}: give the folder a sweep wrote "
                             "(the one with summary.json and numbered job folders)")
    notes: list[str] = []
    summary_path = sweep_dir / "summary.json"
    summary: dict = {}
    if summary_path.exists():
        try:
            summary = json.loads(regular_bytes(summary_path))
        except (OSError, ValueError) as e:
            notes.append(f"{summary_path} could not be read ({e}); jobs were found from their folders")
        else:
            problem = summary_problem(summary)
            if problem:
                notes.append(f"{summary_path}: {problem}; "
                             "jobs were found from their folders")
                summary = {}
    if summary.get("jobs"):
        dirs = {j["num"]: Path(j["dir"]) for j in summary["jobs"]}
        # The job folder inside this sweep folder wins: a copied or moved sweep folder's
        # records name where they were written, which may now hold another sweep.
        dirs = {n: sweep_dir / d.name if (sweep_dir / d.name).is_dir() else d for n, d in dirs.items()}
    else:
        dirs = {int(p.parent.name): p.parent for p in sweep_dir.glob("*/result.json") if p.parent.name.isdigit()}
        summary.setdefault("jobs", [])
    if not dirs:
        raise AggregateError(f"{sweep_dir} has no job results (no summary.json jobs, no <job>/result.json)")
    return summary, dict(sorted(dirs.items())), notes


def _read_job(num: int, d: Path) -> Record:
    """A job's record as this sweep folder holds it: its artifact paths pointed into the
    folder, its job id the number it has in this sweep. Raises RecordError."""
    record = read_record(d)
    written_in = (record.get("job") or {}).get("dir")
    if written_in and Path(written_in) != d.resolve():  # artifact paths into this folder
        record = relocate(record, written_in.rstrip("/"), str(d.resolve()))
    record.setdefault("job", {})["id"] = str(num)  # the number in this sweep names the job
    return record


def load_sweep(sweep_dir: Path) -> tuple[dict, dict[int, Record], list[str]]:
    """(summary, records by job number, notes about what was left out): every record
    whole, for a script that reads them (the report reads a sweep with read_sweep)."""
    summary, dirs, notes = _job_dirs(sweep_dir)
    records = {}
    for num, d in dirs.items():
        try:
            records[num] = _read_job(num, d)
        except RecordError as e:
            notes.append(f"job #{num} left out: {e}")
    return summary, records, notes


# What the page reads of a record once its tables are built: the job's identity and its
# folder's artifacts, where it ran, and its GPU lease (which jobs shared a GPU).
PAGE_KEYS = ("schema_version", "status", "reason", "phase", "job", "config", "resolved", "environment", "artifacts")


def page_part(record: Record) -> Record:
    """The few keys of a record the page and the labels read (PAGE_KEYS, and the timings'
    GPU lease): a 1,000-job sweep keeps these, not 1,000 records of kernel lists."""
    out: dict[str, Any] = {k: record[k] for k in PAGE_KEYS if k in record}  # type: ignore[literal-required]
    lease = (record.get("timings") or {}).get("gpu_lease")
    if lease is not None:
        out["timings"] = {"gpu_lease": lease}
    return cast(Record, out)


@dataclass
class LoadedSweep:
    """A sweep folder read once: what the findings, figures, comparisons and the page
    all take."""
    path: Path
    summary: dict
    records: dict[int, Record]  # by job number, page_part() of each: the tables hold the rest
    notes: list[str]  # what was left out, and why
    jobs: pd.DataFrame
    cats: pd.DataFrame
    kernels: pd.DataFrame
    bench: pd.DataFrame
    unreadable: dict[int, str] = field(default_factory=dict)  # job number -> why its result.json was left out
    # the step's time by model module (tables.MODEL_MODULE_COLUMNS): tables/modules.*
    model_modules: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(MODEL_MODULE_COLUMNS)))
    # each job's launch sites with the most to win (roofline.RECOVERABLE_COLUMNS): tables/recoverable.*
    recoverable: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(RECOVERABLE_COLUMNS)))
    # max-autotune's decisions each autotune=on job made (tables.DECISION_COLUMNS): tables/autotune_decisions.*
    decisions: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(DECISION_COLUMNS)))

    @property
    def started_at(self) -> str:
        return self.summary.get("started_at") or ""


def read_sweep(sweep_dir: Path) -> LoadedSweep:
    """The sweep folder's records read one at a time, each turned into its table rows and
    then dropped but for page_part(); the tables built once at the end, each job's label
    told apart over the whole sweep (tables.unique_labels): a 1,000-job sweep never holds
    every record at once."""
    from sweeper.reporting import tables

    sweep_dir = Path(sweep_dir).resolve()
    summary, dirs, notes = _job_dirs(sweep_dir)
    records: dict[int, Record] = {}
    unreadable: dict[int, str] = {}
    jobs, cats, benches, kernel_parts, module_rows, to_win, decided = [], [], [], [], [], [], []
    for num, d in dirs.items():
        try:
            record = _read_job(num, d)
        except RecordError as e:
            notes.append(f"job #{num} left out: {e}")
            unreadable[num] = str(e)
            continue
        jobs.append(tables.job_row(record, None, None))
        cats += tables.category_rows(record, None)
        benches += tables.bench_rows(record, None)
        module_rows += tables.model_module_rows(record, None)
        to_win += recoverable_rows(record, num)
        decided += decision_rows(record, num)
        rows = tables.kernel_rows(record, None)
        if rows:  # an empty part would make every column of the concatenated table object-typed
            kernel_parts.append(pd.DataFrame(rows, columns=list(tables.KERNEL_COLUMNS)))
        records[num] = page_part(record)
    page = [records[n] for n in sorted(records)]
    names, shared = tables.unique_labels(page), tables.shared_gpu(page)
    for row in jobs:
        row["label"], row["shared_gpu_with"] = names[row["job"]], shared.get(row["job"])
    for row in cats + benches + module_rows + to_win + decided:
        row["label"] = names[row["job"]]
    kernels = (pd.concat(kernel_parts, ignore_index=True) if kernel_parts
               else pd.DataFrame(columns=list(tables.KERNEL_COLUMNS)))
    kernels["label"] = kernels["job"].map(names)
    return LoadedSweep(sweep_dir, summary, records, notes, tables.jobs_frame(jobs),
                       pd.DataFrame(cats, columns=list(tables.CATEGORY_COLUMNS)), kernels,
                       pd.DataFrame(benches, columns=list(tables.BENCH_COLUMNS)), unreadable,
                       pd.DataFrame(module_rows, columns=list(tables.MODEL_MODULE_COLUMNS)),
                       pd.DataFrame(to_win, columns=list(RECOVERABLE_COLUMNS)),
                       pd.DataFrame(decided, columns=list(DECISION_COLUMNS)))
