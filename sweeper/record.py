"""The result record of one job: result.json, its schema version, atomic writes.

docs/result-schema.md documents every field; bump SCHEMA_VERSION on any change that a
reader of older records must know about.
"""

from __future__ import annotations

import gzip
import json
import re
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping

from sweeper.job_spec import JobSpec
from sweeper.record_schema import ASKED_TOO, RESOLVED_KEYS, Record

# 2: busy_pct is the union of kernel intervals over the *unprofiled* wall time; the
#    profiled span's figure moved to busy_pct_profiled_span; timings.steady_loop and
#    timings.nvml.
# 3: `config` is the job's spec as asked, untouched; what the job decided where it ran
#    (device, batch size, compile mode, ...) is `resolved`; ran_config() merges them.
# Older records are upgraded on read (upgrade()).
SCHEMA_VERSION = 3
RESULT_FILE = "result.json"
# What a job process (tasks/job.py) hands its launcher (sweeper/sweep/job_process.py):
# result.json in its folder, and on its output progress lines that start with this mark.
PHASE_MARK = "[sweeper]"
STATUSES = ("ok", "failed", "skipped", "cancelled")  # cancelled: the sweep was interrupted (Ctrl-C, SIGTERM)


def cache_env(cache: str | Path) -> dict[str, str]:
    """The environment that points Inductor and Triton at a job's cache folder (the
    record's artifacts.cache): the job sets it before torch loads (tasks/job.py), and the
    bench scripts that run its files by hand set it so that kernels load, not compile."""
    cache = Path(cache)
    return {"TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton")}


def compiled_warm(timings: dict) -> bool:
    """Whether a job's compile came from a cache (an FX graph cache hit, timings.compile_cache):
    its compile_s is then a load's, not a compile's. In a job's private cache only the
    compile store's earlier compile of the job (or a retried job's own cache) makes one."""
    return bool((timings.get("compile_cache") or {}).get("fxgraph_hits"))


def new_record(spec: JobSpec, job_dir: str | Path) -> Record:
    """The skeleton every result record starts from (status failed until proven ok)."""
    from sweeper import __version__

    job_dir = Path(job_dir)
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "failed",
        "reason": None,
        "phase": "start",
        "job": {
            "id": spec.job_id,
            "dir": str(job_dir),
            "overrides": list(spec.overrides),
            "sweeper_version": __version__,
        },
        "config": dict(spec.config),
        "resolved": {},
        "environment": None,
        "timings": {"phase_s": {}},
        "step": None,
        "modules": [],
        "kernel_table": None,
        "artifacts": {"log": str(job_dir / "job.log"), "traces": {}, "modules": {}},
    }


class RecordError(ValueError):
    """A result.json that is missing, truncated, or not of a schema this version reads."""


def _atomic_write(path: str | Path, data: str | bytes, mode: str, file_mode: int = 0o644) -> None:
    """Write via a temporary file in the same folder and rename: readers, and a sweep
    killed mid-write, see either the old file or the whole new one, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode)  # mkstemp makes it private; results are meant to be read
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    _atomic_write(path, text, "w")


def atomic_write_bytes(path: str | Path, data: bytes, file_mode: int = 0o644) -> None:
    _atomic_write(path, data, "wb", file_mode)


def write_record(job_dir: str | Path, record: Record) -> Path:
    check_record(record, source="record to write")
    path = Path(job_dir) / RESULT_FILE
    atomic_write_text(path, json.dumps(record, indent=1, sort_keys=False, default=str) + "\n")
    return path


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def no_colour(text):
    """Text without terminal colour codes (Ray colours its task names): a record or summary
    is read in files and browsers, where they show as `\x1b[36m`. Anything else as it is."""
    return _ANSI.sub("", text) if isinstance(text, str) else text


class NotRegularFile(OSError):
    """A path that is there but is no regular file: a FIFO, a device, a socket."""


def write_problem(folder: str | Path, make: bool = True) -> str | None:
    """Why `folder` cannot take files (created first when `make`), None where it can: a
    probe file written and removed, so that a command says it before its work, not after."""
    folder = Path(folder)
    try:
        if make:
            folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".sweeper-write-check-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        return str(e.strerror or e)
    return None


def regular_bytes(path: str | Path) -> bytes:
    """A file's bytes, read only where it is a regular file: opening a FIFO in place of a
    summary or record waits for a writer forever (an aggregation hung 11 minutes on one)."""
    import stat

    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFile(f"{path} is not a regular file (a FIFO, device or socket): remove it, or put the "
                             "file it should be in its place")
    with open(path, "rb") as f:
        return f.read()


def read_record(path: str | Path) -> Record:
    """The checked record of a job folder, of its result.json, or of a record saved
    compressed (NAME.result.json.gz, as under bench/results/ and tests/fixtures/)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_FILE
    try:
        data = regular_bytes(path)
        record = json.loads((gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{path}: no result record (the job did not finish)") from None
    except NotRegularFile as e:
        raise RecordError(str(e)) from None
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as e:
        raise RecordError(
            f"{path}: corrupt or truncated result record ({e}); re-run the job to replace it"
        ) from None
    record = upgrade(record)
    check_record(record, source=str(path))
    return record


def upgrade(record: Any) -> Any:
    """An older record in this version's shape, step by step (version 1 to 2, 2 to 3);
    `upgraded_from_schema` keeps the version it was written in. Anything else is
    returned as it is (check_record then says what is wrong with it)."""
    if not isinstance(record, dict) or record.get("schema_version") not in (1, 2):
        return record
    written = record["schema_version"]
    if written == 1:
        _busy_v2(record)
    _resolved_v3(record)
    record["schema_version"] = SCHEMA_VERSION
    record["upgraded_from_schema"] = written
    return record


def _busy_v2(record: dict) -> None:
    """Version 1's busy_pct was the union of kernel intervals over the profiled span. That
    union per run is busy_pct x span_ms / runs, so the unprofiled figure of version 2
    follows from what version 1 kept, and old sweeps can be re-aggregated and compared."""
    from sweeper.analysis.breakdown import busy_figures

    for b in [record.get("step")] + [m.get("breakdown") for m in record.get("modules") or []]:
        if not isinstance(b, dict) or "busy_pct_profiled_span" in b:
            continue
        span_pct, span_ms, runs = b.get("busy_pct"), b.get("span_ms"), b.get("runs")
        b["busy_pct_profiled_span"] = span_pct
        b["busy_ms"] = span_pct / 100 * span_ms / runs if span_pct is not None and span_ms is not None and runs else None
        b["busy_wall_ms"] = b.get("wall_ms")
        b.update(busy_figures(b["busy_ms"], b["busy_wall_ms"]))


def _resolved_v3(record: dict) -> None:
    """Versions 1 and 2 wrote what the job decided over its config. The keys that only
    the job sets move to `resolved`; those that are config keys too (device, batch_size,
    image_size, amp_dtype) are copied there and stay in `config`, since what was asked
    for them is lost (a null batch size reads as the one that ran)."""
    config = record.get("config")
    if not isinstance(config, dict) or "resolved" in record:
        return
    record["resolved"] = {k: (config[k] if k in ASKED_TOO else config.pop(k)) for k in RESOLVED_KEYS if k in config}


def ran_config(record: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration the job ran: its config as asked with what it resolved over it
    (a batch size of null reads as the model's default it ran). The tables, labels and
    keys across sweeps read this; a job that never set up has only what was asked."""
    return {**(record.get("config") or {}), **(record.get("resolved") or {})}


def check_record(record: Any, source: str) -> None:
    if not isinstance(record, dict):
        raise RecordError(f"{source}: a result record must be a JSON object")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(
            f"{source}: schema_version {version!r}, this sweeper reads {SCHEMA_VERSION}"
        )
    missing = [k for k in ("status", "job", "config") if k not in record]
    if missing:
        raise RecordError(f"{source}: missing fields {missing}")
    if record["status"] not in STATUSES:
        raise RecordError(f"{source}: status {record['status']!r} is not one of {STATUSES}")
    if record["status"] != "ok" and not record.get("reason"):
        raise RecordError(f"{source}: a {record['status']} record must give its reason")


def relocate(record: Record, old: str, new: str) -> Record:
    """The record with its artifact paths moved from the node's scratch folder into the
    sweep folder. Module source_paths stay: they name files in the node's compile cache."""

    def move(path):
        return new + path[len(old):] if isinstance(path, str) and path.startswith(old + "/") else path

    out = json.loads(json.dumps(record))
    out["job"]["dir"] = new
    arts = out.get("artifacts") or {}
    arts["log"] = move(arts.get("log"))
    for group in ("traces", "modules"):
        arts[group] = {k: move(v) for k, v in (arts.get(group) or {}).items()}
    for m in out.get("modules", []):
        m["trace"], m["artifact"] = move(m.get("trace")), move(m.get("artifact"))
    return out


def storage_missed(record: Mapping[str, Any]) -> str | None:
    """What of the job missed its shared storage (hydra.launcher.storage_path), or None: its
    folder came back through Ray instead (job.storage_note), or its compile could not be
    kept there (timings.compile_store.notes)."""
    notes = [(record.get("job") or {}).get("storage_note")]
    notes += [n for n in (((record.get("timings") or {}).get("compile_store") or {}).get("notes") or [])
              if "could not be kept in" in str(n) or "could not be put in storage" in str(n)]
    said = [no_colour(str(n)) for n in notes if n]
    return "; ".join(said) if said else None


def accuracy_of(record: Mapping[str, Any]) -> str | None:
    """passed, failed (with how many tensors), or None where the job's step was not checked
    against eager (tasks/accuracy.py)."""
    acc = record.get("accuracy") or {}
    if not acc.get("checked"):
        return None
    if acc.get("passed"):
        return "passed"
    return f"failed: {acc.get('failed_count')} of {acc.get('compared')} tensors outside tolerance {acc.get('tolerance')}"
