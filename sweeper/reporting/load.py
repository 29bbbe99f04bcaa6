"""A sweep folder's records, read as every report and comparison reads them (pure, but for
file reads): summary.json when present, else every <job>/result.json. A record that
cannot be read is left out with a note naming it and the fix, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from sweeper.record import Record, RecordError, read_record, relocate


class AggregateError(ValueError):
    """The folder is not a sweep folder that can be aggregated."""


def summary_problem(summary) -> str | None:
    """Why a parsed summary.json is not one a sweep wrote (valid JSON of another shape:
    `null`, `[]`, `{"jobs": 5}`): "holds list, not an object"; or None."""
    if not isinstance(summary, dict):
        return f"holds {type(summary).__name__}, not an object"
    if not isinstance(summary.get("jobs", []), list) or not all(isinstance(j, dict) for j in summary.get("jobs") or []):
        return "holds `jobs` that is not a list of jobs"
    if not isinstance(summary.get("counts") or {}, dict):
        return "holds `counts` that is not an object"
    return None


def load_sweep(sweep_dir: Path) -> tuple[dict, dict[int, Record], list[str]]:
    """(summary, records by job number, notes about what was left out)."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise AggregateError(f"no sweep folder at {sweep_dir}: give the folder a sweep wrote "
                             "(the one with summary.json and numbered job folders)")
    notes: list[str] = []
    summary_path = sweep_dir / "summary.json"
    summary: dict = {}
    if summary_path.exists():
        try:
            summary = json.loads(summary_path.read_text())
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
    records = {}
    for num, d in sorted(dirs.items()):
        try:
            record = read_record(d)
            written_in = (record.get("job") or {}).get("dir")
            if written_in and Path(written_in) != d.resolve():  # artifact paths into this folder
                record = relocate(record, written_in.rstrip("/"), str(d.resolve()))
            record.setdefault("job", {})["id"] = str(num)  # the number in this sweep names the job
            records[num] = record
        except RecordError as e:
            notes.append(f"job #{num} left out: {e}")
    return summary, records, notes
