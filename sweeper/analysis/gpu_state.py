"""The GPU's state while a job timed (pure: NVML's readings in, what they say out). Each
stretch of the steady loop ends with a reading (tasks/nvml_util.GpuStateReader): SM and
memory clocks, power, temperature and the reasons NVML gives for the clocks being where
they are. A stretch taken while the GPU slowed itself (thermal or power slowdown, a power
cap, a power brake) is marked and left out of the loop's step time; a job whose SM clock
moved over its loop says so. The clocks are a figure of the job (the jobs table), so a
nightly change that moved with them can be told from one that did not."""

from __future__ import annotations

import statistics
from typing import Iterable, Mapping

# NVML's clock event (throttle) reasons, by bit (nvml.h: nvmlClocksEventReason*)
REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
# The reasons that slow a stretch down: the GPU lowered its clocks for heat or power. Not
# idle (between calls), not clocks someone set (they hold for every stretch alike), not
# sync boost (several GPUs kept at one clock).
SLOWING = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                     "hw_power_brake_slowdown"})
CLOCKS_MOVED = 0.05  # a job's SM clock moved when its lowest stretch is this far under its highest


def reason_names(mask: int) -> list[str]:
    """The names of the reasons set in NVML's bit mask (unknown bits as hex)."""
    names = [name for bit, name in REASONS.items() if mask & bit]
    rest = mask & ~sum(REASONS)
    return names + ([f"0x{rest:x}"] if rest else [])


def slowed(reading: Mapping) -> bool:
    """Whether a reading's reasons say the GPU slowed itself."""
    return bool(SLOWING.intersection(reading.get("reasons") or ()))


def loop_state(readings: list[dict], chunk_step_ms: list[float]) -> dict:
    """What the readings of the loop's stretches say: the clocks (median, lowest, highest),
    power, temperature, the reasons seen, the stretches slowed, whether the SM clock moved,
    and the step time of the stretches not slowed (None where none was, or all were)."""
    if not readings:
        return {}
    sm = [r["sm_mhz"] for r in readings if r.get("sm_mhz") is not None]
    mem = [r["mem_mhz"] for r in readings if r.get("mem_mhz") is not None]
    power = [r["power_w"] for r in readings if r.get("power_w") is not None]
    temp = [r["temp_c"] for r in readings if r.get("temp_c") is not None]
    slow = [i for i, r in enumerate(readings) if slowed(r)]
    out: dict = {
        "rounds": len(readings),
        "sm_mhz": _spread(sm), "mem_mhz": _spread(mem), "power_w": _spread(power), "temp_c": _spread(temp),
        "reasons": sorted({n for r in readings for n in r.get("reasons") or ()}),
        "slowed_rounds": slow,
        "clocks_moved": bool(sm) and min(sm) < (1 - CLOCKS_MOVED) * max(sm),
    }
    kept = [c for i, c in enumerate(chunk_step_ms[:len(readings)]) if i not in slow]
    if slow and kept:
        out["step_ms_not_slowed"] = sum(kept) / len(kept)
    return out


def _spread(values: Iterable[float]) -> dict | None:
    v = list(values)
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v)}


def state_words(state: Mapping) -> str:
    """One line for the job's log and the report: the clocks and what moved them."""
    if not state:
        return ""
    sm = state.get("sm_mhz") or {}
    text = (f"SM clock {sm.get('median', float('nan')):.0f} MHz" +
            (f" ({sm['min']:.0f}-{sm['max']:.0f}: moved)" if state.get("clocks_moved") else "") +
            f" over {state['rounds']} stretches")
    if state.get("temp_c"):
        text += f", up to {state['temp_c']['max']:.0f} C"
    if state.get("power_w"):
        text += f", {state['power_w']['median']:.0f} W"
    if state.get("slowed_rounds"):
        slowing = ", ".join(r for r in state["reasons"] if r in SLOWING)
        if len(state["slowed_rounds"]) >= state["rounds"]:  # nothing left to time without it
            text += f"; every stretch slowed by the GPU ({slowing}): the step time is a slowed GPU's"
        else:
            text += (f"; {len(state['slowed_rounds'])} of {state['rounds']} stretches slowed by the GPU "
                     f"({slowing}), left out of the loop's step time")
    return text
