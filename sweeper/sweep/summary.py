"""The sweep-level summary: summary.json beside the job folders, and the closing report
that names failed jobs, their logs, and how to re-run them (pure, but for file writes)."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

from sweeper.command_line import rerun_command, sweep_dir_override
from sweeper.record import Record, accuracy_of, atomic_write_text, no_colour, storage_missed
from sweeper.reporting.headline import busy_while_measuring, headline, launch_us, timing_iqr_pct  # noqa: F401 - also this module's
from sweeper.words import count

SUMMARY_FILE = "summary.json"


def job_entry(num: int, overrides: list[str], job_dir: Path, record: Record, reused: bool = False) -> dict:
    return {
        "num": num,
        "overrides": list(overrides),
        "status": record["status"],
        "reason": no_colour(record.get("reason")),
        "phase": record.get("phase"),
        "dir": str(job_dir),
        # where its log is: the job folder's, or where the node kept it (record_without_worker)
        "log": (record.get("artifacts") or {}).get("log", str(job_dir / "job.log")),
        "log_note": record.get("log_note"),
        "ray_logs": (record.get("artifacts") or {}).get("ray_logs"),
        "reused_from_earlier_run": reused,
        "accuracy": accuracy_of(record),
        "retried": (f"attempt {(record.get('job') or {})['retried'].get('attempt')} on "
                    f"{(record.get('job') or {})['retried'].get('host')}"
                    if isinstance((record.get("job") or {}).get("retried"), dict) else None),
        "storage_missed": storage_missed(record),
        "stored_at": (record.get("job") or {}).get("stored_at"),  # its folder in shared storage
        "headline": headline(record),
    }


def write_summary(sweep_dir: Path, jobs: list[dict], started: float, command: list[str], done: bool) -> Path:
    counts = {s: sum(1 for j in jobs if j["status"] == s) for s in ("ok", "failed", "skipped", "cancelled")}
    # a compiled step that does not compute what eager does, and results that missed storage:
    # a nightly judges them (history compare), so they are counted where it reads
    counts["accuracy_failed"] = sum(1 for j in jobs if str(j.get("accuracy") or "").startswith("failed"))
    counts["storage_missed"] = sum(1 for j in jobs if j.get("storage_missed"))
    data = {
        "sweep_dir": str(sweep_dir),
        "command": command,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(started)),
        "elapsed_s": round(time.time() - started, 1),
        "complete": done,
        "counts": counts,
        "jobs": sorted(jobs, key=lambda j: j["num"]),
    }
    path = Path(sweep_dir) / SUMMARY_FILE
    atomic_write_text(path, json.dumps(data, indent=1) + "\n")
    return path


def close_sweep(sweep_dir: Path, jobs: list[dict], command: list[str], interrupted: bool = False) -> int:
    """What every sweep ends with, whichever launcher ran it: the closing report, where the
    summary is, the tables, figures and report.html (not after an interruption), and the
    exit code: 130 interrupted, 1 when a job failed, else 0."""
    text, failed = closing_report(jobs, Path(sweep_dir), command)
    print(text, flush=True)
    print(f"summary: {Path(sweep_dir) / SUMMARY_FILE}", flush=True)
    if interrupted:
        return 130
    _report(Path(sweep_dir))
    return 1 if failed else 0


def _report(sweep_dir: Path) -> None:
    """A failure here must not fail a finished sweep: the results are on disk, and
    `python -m sweeper.aggregate` can be run again."""
    import sys

    from sweeper.aggregate import aggregate  # the reporting layer sits above this module

    try:
        print(f"report: {aggregate(sweep_dir)}", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"sweeper: the report could not be made ({type(e).__name__}: {e}); the results are kept. "
              f"Retry with: python -m sweeper.aggregate {sweep_dir}", file=sys.stderr, flush=True)


def closing_report(jobs: list[dict], sweep_dir: Path, command: list[str]) -> tuple[str, bool]:
    """Lines to print when the sweep ends, and whether any job failed."""
    lines = []
    for j in sorted(jobs, key=lambda j: j["num"]):
        name = " ".join(j["overrides"]) or "defaults"
        reason = f": {j['reason']}" if j.get("reason") else ""
        wrong = str(j.get("accuracy") or "").startswith("failed")
        status = f"{j['status']}, accuracy FAILED" if wrong else j["status"]
        lines.append(f"{status:9s} #{j['num']} {name}{reason}")
    inaccurate = [j for j in jobs if str(j.get("accuracy") or "").startswith("failed")]
    if inaccurate:
        lines.append(f"{count(len(inaccurate), 'job')} compiled a step that does not compute what eager does "
                     "(its times are those of another computation):")
        lines += [f"  #{j['num']}: accuracy {j['accuracy']}" for j in inaccurate]
    stored = [str(j["stored_at"]) for j in jobs if j.get("stored_at")]
    if stored:  # said at the end too: where to look for the traces, logs and modules
        where = sorted({s.rstrip("/").rsplit("/", 1)[0] for s in stored})
        lines.append(f"storage: {count(len(stored), 'job')}' folders (traces, logs, modules) are in "
                     f"{', '.join(where[:3])}{' and others' if len(where) > 3 else ''}")
    missed = [j for j in jobs if j.get("storage_missed")]
    if missed:
        lines.append(f"{count(len(missed), 'job')} missed the shared storage (hydra.launcher.storage_path):")
        lines += [f"  #{j['num']}: {j['storage_missed']}" for j in missed]
    failed = [j for j in jobs if j["status"] in ("failed", "cancelled")]
    if failed:
        lines.append(f"{len(failed)} of {count(len(jobs), 'job')} did not finish. Logs:")
        for j in failed:
            lines.append(f"  #{j['num']}: {j['log'] or j.get('log_note') or 'no log'}")
        ray_logs = sorted({j["ray_logs"] for j in failed if j.get("ray_logs")})
        if ray_logs:
            lines.append(f"Ray's own logs of its workers: {', '.join(ray_logs)}")
        args = " ".join(shlex.quote(a) for a in command if not a.startswith("hydra.sweep.dir="))
        lines.append("Re-run only the failed and missing jobs (finished ones are kept):")
        lines.append(f"  python -m sweeper {args} {sweep_dir_override(sweep_dir)}")
        one = failed[0]
        lines.append("Re-run one job alone, e.g.:")
        lines.append(f"  {rerun_command(one['overrides'])}")
    return "\n".join(lines), bool(failed)
