"""How a job's compile started, as the tables say it: cold, seeded from the autotune store, or
warm from a cache (the compile store's earlier compile); its C++ builds, and the compile
seconds of the runs a resumed job went on from."""

from __future__ import annotations

import pandas as pd

from sweeper.record import compiled_warm



def seeded(autotune_seeded) -> bool:
    """Whether a job's max-autotune compile started from the autotune store (its
    `autotune_seeded` column: choices found there), so compiled cold or not."""
    return autotune_seeded is not None and bool(pd.notna(autotune_seeded)) and autotune_seeded > 0


def compile_state(timings: dict) -> str:
    """cold, seeded or warm (JOB_COLUMNS["compile_state"]), from a record's timings."""
    if compiled_warm(timings):
        return "warm"
    return "seeded" if seeded((timings.get("autotune_store") or {}).get("seeded_entries")) else "cold"


def cpp_builds(timings: dict) -> int | None:
    """JOB_COLUMNS["cpp_builds"], from a record's timings."""
    timers = timings.get("compile_timers")
    if not isinstance(timers, dict):
        return None
    built = timers.get("compile_file")
    return int(built[0]) if isinstance(built, list) and built else 0


def compile_s_before(timings: dict) -> float | None:
    """JOB_COLUMNS["compile_s_before"], from a record's timings."""
    earlier = [a for a in (timings.get("autotune_store") or {}).get("earlier_attempts") or []
               if a.get("stopped_in") == "compile"]
    return round(sum(a.get("phase_s_at_stop") or 0 for a in earlier), 1) if earlier else None


def state_of(row) -> str:
    """A jobs-table row's compile_state; tables written before that column existed: cold or
    seeded, from autotune_seeded."""
    state = row.get("compile_state")
    if isinstance(state, str):
        return state
    return "seeded" if seeded(row.get("autotune_seeded")) else "cold"
