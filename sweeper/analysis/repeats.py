"""Repeats of one configuration (jobs apart only in their seed, `seed=0,1`) as one side of a
comparison (pure: jobs-table rows in, one row out), and how far they spread.

A sweep that repeats a configuration measures its own run-to-run noise: on an H100, resnet50
b64 inference without max-autotune ran its kernels in 3.173 and 3.116 ms a step (1.8% apart)
and its layer2.0 in 0.226 and 0.208 ms (8.1%), while two max-autotune runs of it (the second
seeded with the first's choices) were 0.03% apart. A twin's verdict then stands on the
repeats' median, held against the wider of the fixed noise (autotune_verdict.RERUN_DEVICE_PCT)
and the spread the repeats showed; pairing each repeat with each repeat of the other side
would say one verdict per combination, and they can disagree.

Two repeats are few: their spread can only widen the fixed noise, never narrow it.
"""

from __future__ import annotations

import re
import statistics
from typing import Callable, Iterable, Mapping, Sequence

from sweeper.analysis.autotune_verdict import as_float

# what a compile cost: a seeded or warm repeat skipped the tuning a cold one paid, so these
# come from the cold repeats where there is one (jobs table: compile_state)
COMPILE_FIGURES = ("compile_s", "template_tuning_s", "coordinate_descent_s", "kernel_autotuning_s")
SPREAD_FIGURES = ("device_ms", "steady_step_ms", "compiled_step_ms")  # <figure>_spread_pct in a merged row
SHARE_PREFIX = "share_"  # the jobs table's category shares (% of device_ms)
_NOT_FIGURES = ("job", "batch_size", "image_size", "seed")


def spread_pct(values: Iterable[float | None]) -> float | None:
    """(max - min) over the median, %, of the values given; None for fewer than two."""
    got = [v for v in values if v is not None]
    if len(got) < 2:
        return None
    mid = statistics.median(got)
    return (max(got) - min(got)) / mid * 100 if mid else None


def figure_spread(rows: Sequence[Mapping], figure: Callable[[Mapping], float | None]) -> float | None:
    """The spread of `figure` over a configuration's repeats (the rows a merged row keeps)."""
    return spread_pct(figure(r) for r in rows)


def cold(row: Mapping) -> bool:
    """Whether a job's compile started from nothing (the jobs table's compile_state): a
    seeded or warm one skipped the tuning a cold one pays for."""
    return str(row.get("compile_state") or "cold") == "cold"


def base_label(label: object) -> str:
    """A repeat's label without the job number distinct_labels gave it ("... #3")."""
    return re.sub(r" #\d+$", "", str(label))


def _numbers(rows: Sequence[Mapping], column: str) -> list[float]:
    return [v for v in (as_float(r.get(column)) for r in rows) if v is not None]


def merged(rows: Sequence[Mapping]) -> dict:
    """One row for a configuration's repeats: the first's fields, every figure the median
    over the repeats that have it (compile seconds over the cold ones where any, the
    compile state "cold" then), the category shares those of the median milliseconds, and
    `repeats` (the rows), `repeat_jobs`, `<figure>_spread_pct` for SPREAD_FIGURES. One row
    comes back as it is, with `repeats` [it]."""
    if not rows:
        raise ValueError("merged() needs at least one row")
    out = dict(rows[0])
    out["repeats"] = list(rows)
    out["repeat_jobs"] = [r.get("job") for r in rows]
    if len(rows) == 1:
        return out
    colds = [r for r in rows if cold(r)]
    for column, value in rows[0].items():
        if column in _NOT_FIGURES or type(value).__name__ in ("bool", "bool_") or (as_float(value) is None and value is not None):
            continue
        source = colds if column in COMPILE_FIGURES and colds else rows
        got = _numbers(source, column)
        if got:
            out[column] = statistics.median(got)
    if colds:
        out["compile_state"] = "cold"
    device = [as_float(r.get("device_ms")) for r in rows]
    total = as_float(out.get("device_ms"))
    if total:
        for column in [c for c in rows[0] if str(c).startswith(SHARE_PREFIX)]:
            ms = [d * s / 100 for d, s in ((d, as_float(r.get(column))) for d, r in zip(device, rows))
                  if d is not None and s is not None]
            if ms:
                out[column] = statistics.median(ms) / total * 100
    for figure in SPREAD_FIGURES:
        out[f"{figure}_spread_pct"] = spread_pct(as_float(r.get(figure)) for r in rows)
    numbers = ", ".join(f"#{r.get('job')}" for r in rows[:-1]) + f" and #{rows[-1].get('job')}"
    out["label"] = f"{base_label(rows[0].get('label'))} ({numbers})"
    return out


def widest(noise_pct: float, *spreads: float | None) -> float:
    """The noise a change is held against: the fixed noise or the widest spread the repeats
    showed, whichever is wider."""
    return max([noise_pct, *(s for s in spreads if s is not None)])
