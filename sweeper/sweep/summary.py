"""The sweep-level summary: summary.json beside the job folders, and the closing report
that names failed jobs, their logs, and how to re-run them (pure, but for file writes)."""

from __future__ import annotations

import json
import shlex
import statistics
import time
from pathlib import Path

from sweeper.record import Record, atomic_write_text

SUMMARY_FILE = "summary.json"


# The phases whose figures are timings and profiles (tasks/job.py): other work on the host
# during them moves launch-bound figures.
MEASURING_PHASES = ("timing", "steady_loop", "time_modules", "profile_step", "profile_modules")


def busy_while_measuring(timings: dict) -> float | None:
    """The most cores that other work kept busy during any measuring phase (the record's
    timings.host_busy_cores, tasks/host_load.py), None where not recorded."""
    by_phase = timings.get("host_busy_cores") or {}
    values = [by_phase[p] for p in MEASURING_PHASES if by_phase.get(p) is not None]
    return max(values) if values else None


def _spreads(record: dict, timings_key: str, module_key: str) -> list[dict]:
    """The spread objects (breakdown.spread) a job recorded under timings[timings_key] and
    under each module's module_key, those that are there."""
    found = [(record.get("timings") or {}).get(timings_key)]
    found += [m.get(module_key) for m in record.get("modules") or []]
    return [s for s in found if isinstance(s, dict)]


def timing_iqr_pct(record: dict) -> float | None:
    """How much the job's timed rounds varied: the largest interquartile range, as a
    percentage of the median, over the compiled step's timing and each module's wall time.
    Why: launch-bound figures follow the host's launch speed, which can drift while nothing
    else runs (docs/findings.md: densenet121's module rounds ranged 17 to 30 ms a call
    with no other busy core), so host_busy_cores alone cannot flag them. None where no
    timing was recorded."""
    values = [100 * s["iqr"] / s["median"] for s in _spreads(record, "compiled_step_ms", "wall_ms")
              if s.get("iqr") is not None and s.get("median")]
    return round(max(values), 1) if values else None


def launch_us(record: dict) -> float | None:
    """The host's launch speed while the job measured: the median of its launch-probe
    readings (tasks/timing.launch_probe_us), before the step's timing and before each
    module round, in microseconds per launch. Why: two jobs whose launch-bound figures
    differ may only have run on a host at two speeds (docs/findings.md), and this
    says which. None in records written before the probe existed."""
    values = [v for s in _spreads(record, "launch_us", "launch_us") for v in s.get("values") or []]
    return round(statistics.median(values), 3) if values else None


def headline(record: Record) -> dict:
    """The figures a reader of a sweep wants first, None where the job has none."""
    t = record.get("timings") or {}
    step = record.get("step") or {}
    return {
        "compile_s": t.get("compile_s"),
        "compiled_step_ms": (t.get("compiled_step_ms") or {}).get("median"),
        "eager_step_ms": (t.get("eager_step_ms") or {}).get("median"),
        "speedup": t.get("speedup"),
        "peak_memory_mb": t.get("peak_memory_mb"),
        "busy_pct": step.get("busy_pct"),
        "nvml_util_pct": (t.get("nvml") or {}).get("util_pct"),
        "busy_pct_reference_style": step.get("busy_pct_reference_style"),
        "busy_pct_profiled_span": step.get("busy_pct_profiled_span"),
        "busy_capped": step.get("busy_capped"),
        "host_busy_cores": busy_while_measuring(t),
        "timing_iqr_pct": timing_iqr_pct(record),
        "launch_us": launch_us(record),
    }


def job_entry(num: int, overrides: list[str], job_dir: Path, record: Record, reused: bool = False) -> dict:
    return {
        "num": num,
        "overrides": list(overrides),
        "status": record["status"],
        "reason": record.get("reason"),
        "phase": record.get("phase"),
        "dir": str(job_dir),
        # where its log is: the job folder's, or where the node kept it (record_without_worker)
        "log": (record.get("artifacts") or {}).get("log", str(job_dir / "job.log")),
        "log_note": record.get("log_note"),
        "ray_logs": (record.get("artifacts") or {}).get("ray_logs"),
        "reused_from_earlier_run": reused,
        "headline": headline(record),
    }


def write_summary(sweep_dir: Path, jobs: list[dict], started: float, command: list[str], done: bool) -> Path:
    counts = {s: sum(1 for j in jobs if j["status"] == s) for s in ("ok", "failed", "skipped", "cancelled")}
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


def rerun_command(overrides: list[str]) -> str:
    """The command that runs one job alone."""
    return "python -m sweeper " + " ".join(shlex.quote(o) for o in overrides)


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
        lines.append(f"{j['status']:9s} #{j['num']} {name}{reason}")
    failed = [j for j in jobs if j["status"] in ("failed", "cancelled")]
    if failed:
        lines.append(f"{len(failed)} of {len(jobs)} jobs did not finish. Logs:")
        for j in failed:
            lines.append(f"  #{j['num']}: {j['log'] or j.get('log_note') or 'no log'}")
        ray_logs = sorted({j["ray_logs"] for j in failed if j.get("ray_logs")})
        if ray_logs:
            lines.append(f"Ray's own logs of its workers: {', '.join(ray_logs)}")
        args = " ".join(shlex.quote(a) for a in command if not a.startswith("hydra.sweep.dir="))
        lines.append("Re-run only the failed and missing jobs (finished ones are kept):")
        lines.append(f"  python -m sweeper {args} hydra.sweep.dir={shlex.quote(str(sweep_dir))}")
        one = failed[0]
        lines.append("Re-run one job alone, e.g.:")
        lines.append(f"  {rerun_command(one['overrides'])}")
    return "\n".join(lines), bool(failed)
