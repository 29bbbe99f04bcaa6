"""A job record's headline figures: what summary.json and the jobs table show first, under
the same names (pure: a record in, numbers out). The sweep side writes them into
summary.json, the reporting side into its tables; neither imports the other for it."""

from __future__ import annotations

import statistics
from typing import Any, Mapping

from sweeper.record import Record


# The phases whose figures are timings and profiles (tasks/job.py): other work on the host
# during them moves launch-bound figures.
MEASURING_PHASES = ("timing", "steady_loop", "time_modules", "profile_step", "profile_modules")


def busy_while_measuring(timings: dict) -> float | None:
    """The most cores that other work kept busy during any measuring phase (the record's
    timings.host_busy_cores, tasks/host_load.py), None where not recorded."""
    by_phase = timings.get("host_busy_cores") or {}
    values = [by_phase[p] for p in MEASURING_PHASES if by_phase.get(p) is not None]
    return max(values) if values else None


def _spreads(record: Mapping[str, Any], timings_key: str, module_key: str) -> list[dict]:
    """The spread objects (breakdown.spread) a job recorded under timings[timings_key] and
    under each module's module_key, those that are there."""
    found = [(record.get("timings") or {}).get(timings_key)]
    found += [m.get(module_key) for m in record.get("modules") or []]
    return [s for s in found if isinstance(s, dict)]


def timing_iqr_pct(record: Mapping[str, Any]) -> float | None:
    """How much the job's timed rounds varied: the largest interquartile range, as a
    percentage of the median, over the compiled step's timing and each module's wall time.
    Why: launch-bound figures follow the host's launch speed, which can drift while nothing
    else runs (docs/findings.md: densenet121's module rounds ranged 17 to 30 ms a call
    with no other busy core), so host_busy_cores alone cannot flag them. None where no
    timing was recorded."""
    values = [100 * s["iqr"] / s["median"] for s in _spreads(record, "compiled_step_ms", "wall_ms")
              if s.get("iqr") is not None and s.get("median")]
    return round(max(values), 1) if values else None


def launch_us(record: Mapping[str, Any]) -> float | None:
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
