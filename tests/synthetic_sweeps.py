"""Synthetic sweeps of any size from the committed H200 records, for the tests and
bench/report_scale.py: the 18 real jobs of tests/fixtures/h200 (headline, example, builds)
copied over and over, each copy's model renamed (densenet121 -> densenet121_v3) so that
every job of the sweep is a distinct configuration of the same model family. Job n is
real record n % 18 (the headline's four first: a 4-job sweep is the headline's).

A later night of a synthetic sweep (`night`) is the same jobs with some made slower (their
kernels, step and loop times scaled), so that a compare flags exactly those."""

from __future__ import annotations

import copy
import gzip
import json
from datetime import datetime, timedelta
from pathlib import Path

H200 = Path(__file__).parent / "fixtures" / "h200"
SOURCES = (("headline", 4), ("example", 6), ("builds", 8))


def real_records() -> list[dict]:
    """The 18 committed H200 records, in the order synthetic jobs take them."""
    out = []
    for folder, n in SOURCES:
        for i in range(n):
            out.append(json.loads(gzip.decompress((H200 / folder / f"{i}.result.json.gz").read_bytes())))
    return out


def renamed(record: dict, copy_no: int) -> dict:
    """The record as a job of another model of the same family (copy 0: unchanged)."""
    rec = copy.deepcopy(record)
    if copy_no:
        for part in ("config", "resolved"):
            if isinstance(rec.get(part), dict) and "model" in rec[part]:
                rec[part]["model"] = f"{rec[part]['model']}_v{copy_no}"
        job = rec.get("job") or {}
        job["overrides"] = [f"model={rec['config']['model']}" if o.startswith("model=") else o
                            for o in job.get("overrides") or []]
    return rec


def slowed(record: dict, factor: float) -> dict:
    """The record with its compiled step, loop, kernels and categories `factor` times slower."""
    rec = copy.deepcopy(record)
    t = rec.get("timings") or {}
    loop = t.get("steady_loop") or {}
    if loop.get("step_ms"):
        loop["step_ms"] *= factor
        loop["chunk_step_ms"] = [c * factor for c in loop.get("chunk_step_ms") or []]
    spread = t.get("compiled_step_ms") or {}
    for k in ("median", "trimmed_mean", "min", "max", "iqr"):
        if isinstance(spread.get(k), (int, float)):
            spread[k] *= factor
    spread["values"] = [v * factor for v in spread.get("values") or []]
    step = rec.get("step") or {}
    if step.get("device_ms"):
        step["device_ms"] *= factor
    for k in step.get("kernels") or []:
        if k.get("device_ms") is not None:
            k["device_ms"] *= factor
    for c in (step.get("categories") or {}).values():
        if c.get("device_ms") is not None:
            c["device_ms"] *= factor
    return rec


def write_sweep(dest: Path, n_jobs: int, started_at: datetime | None = None, slower: dict[int, float] | None = None,
                records: list[dict] | None = None) -> Path:
    """A complete sweep folder of n_jobs synthetic jobs at dest (summary.json and
    <n>/result.json); `slower`: job number -> factor its times are scaled by."""
    records = records or real_records()
    started_at = started_at or datetime(2026, 12, 1, 2, 0, 0)
    dest.mkdir(parents=True, exist_ok=True)
    entries = []
    for n in range(n_jobs):
        rec = renamed(records[n % len(records)], n // len(records))
        if slower and n in slower:
            rec = slowed(rec, slower[n])
        job_dir = dest / str(n)
        job_dir.mkdir(exist_ok=True)
        rec.setdefault("job", {})["id"] = str(n)
        rec["job"]["dir"] = str(job_dir)
        (job_dir / "result.json").write_text(json.dumps(rec))
        entries.append({"num": n, "overrides": rec["job"].get("overrides") or [], "status": rec.get("status"),
                        "reason": rec.get("reason"), "phase": rec.get("phase"), "dir": str(job_dir),
                        "log": str(job_dir / "job.log"), "log_note": None, "ray_logs": None})
    counts = {s: sum(e["status"] == s for e in entries) for s in ("ok", "failed", "skipped", "cancelled")}
    summary = {"sweep_dir": str(dest), "command": ["+sweep=nightly", f"hydra.sweep.dir={dest}"],
               "started_at": started_at.isoformat(timespec="seconds"), "elapsed_s": 3600.0, "complete": True,
               "counts": counts, "jobs": entries}
    (dest / "summary.json").write_text(json.dumps(summary))
    return dest


def write_nights(root: Path, n_jobs: int, nights: int = 2, slower: dict[int, float] | None = None) -> list[Path]:
    """`nights` complete sweeps of the same n_jobs under root (root/night1, ...), a day
    apart; the last has the jobs of `slower` slowed."""
    records = real_records()
    start = datetime(2026, 12, 1, 2, 0, 0)
    return [write_sweep(root / f"night{i + 1}", n_jobs, start + timedelta(days=i),
                        slower if i == nights - 1 else None, records) for i in range(nights)]
