"""Which part of max-autotune to turn on, per pair of twin jobs (pure: two jobs-table rows
in, advice out).

`mode="max-autotune"` turns on two things (torch._inductor.list_mode_options()):
`max_autotune` (matmul and convolution templates timed against the library call, and more
launch configs for Triton's pointwise and reduction kernels) and `coordinate_descent_tuning`
(each Triton kernel's block sizes searched). They cost compile time apart and change
different kernels:

- templates: the kernels' time of matmuls and convolutions (Triton templates and library
  calls: what the choice is between), their cost the template timing, precompiling and
  epilogue-fusion benchmarks. On alone: `+inductor.max_autotune_gemm=true` (autotune=off).
- kernel configs: the time of Inductor's own Triton kernels (pointwise, reduction,
  persistent reduction), their cost coordinate descent and the extra config choice. On
  alone: `+inductor.coordinate_descent_tuning=true +inductor.max_autotune_pointwise=true`.

Each part's gain is its kernels' time off less on, judged against the kernels' run-to-run
noise under max-autotune (autotune_verdict.RERUN_DEVICE_PCT of the larger side). A part
counts when it gains beyond that; one that loses beyond it is named (pytorch#194736:
max-autotune's reduction configs drop the default one, 1.03-1.21x slower). The advice: the
parts that gain, with the share of the summed gains they keep, their compile seconds, and
the steps after which they pay back; nothing when no part gains. Fusion can move time
between categories (an epilogue fused into a template leaves the pointwise kernels), so a
part's gain is read as what its kernels took, not a controlled experiment; the printed
settings run it as one (`python -m sweeper ... autotune=off <settings>`), and a sweep that
holds that job says how much of the full gain it kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from sweeper.analysis.autotune_verdict import RERUN_DEVICE_PCT, as_float
from sweeper.analysis.categories import (LIBRARY, TRITON_PERSISTENT, TRITON_POINTWISE, TRITON_REDUCTION,
                                         TRITON_TEMPLATE)
from sweeper.analysis.repeats import SHARE_PREFIX, cold, widest


@dataclass(frozen=True)
class Part:
    name: str
    categories: tuple[str, ...]
    settings: tuple[str, ...]  # the overrides that turn this part alone on, with autotune=off
    compile_columns: tuple[str, ...]  # the jobs table's compile seconds this part costs


TEMPLATES = Part("templates", (TRITON_TEMPLATE, LIBRARY), ("+inductor.max_autotune_gemm=true",),
                 ("template_tuning_s",))
KERNEL_CONFIGS = Part("kernel configs", (TRITON_POINTWISE, TRITON_REDUCTION, TRITON_PERSISTENT),
                      ("+inductor.coordinate_descent_tuning=true", "+inductor.max_autotune_pointwise=true"),
                      ("coordinate_descent_s", "kernel_autotuning_s"))
PARTS = (TEMPLATES, KERNEL_CONFIGS)
GAINS, LOSES, WITHIN = "gains", "loses", "within noise"


def part_ms(row: Mapping, part: Part) -> float | None:
    """A job's kernels' time a step in a part's categories, ms (None without shares)."""
    total = as_float(row.get("device_ms"))
    shares = [as_float(row.get(SHARE_PREFIX + c)) for c in part.categories]
    if total is None or all(s is None for s in shares):
        return None
    return total * sum(s or 0.0 for s in shares) / 100


def part_compile_s(off: Mapping, on: Mapping, part: Part) -> float | None:
    """What a part added to the compile: its timers' seconds in the on twin less the off
    twin's (the off twin chooses Triton configs too); None where the on twin's record lacks
    one of them."""
    got = [(as_float(on.get(c)), as_float(off.get(c))) for c in part.compile_columns]
    if any(a is None for a, _ in got):  # a record made before Inductor's timer was read: unknown, not 0
        return None
    return max(0.0, sum((a or 0.0) - (b or 0.0) for a, b in got))


@dataclass(frozen=True)
class PartResult:
    part: Part
    off_ms: float
    on_ms: float
    gain_ms: float  # off - on: over 0, the part made its kernels faster
    noise_ms: float
    word: str  # gains, loses, within noise
    compile_s: float | None


def parts(off: Mapping, on: Mapping, noise_pct: float = RERUN_DEVICE_PCT,
          part_noise: Mapping[str, float] | None = None) -> list[PartResult]:
    """Each part's kernels off against on, held against `noise_pct`, or the part's own
    noise in `part_noise` (by part name: how far its kernels spread over a side's repeats)
    where that is wider."""
    out = []
    for part in PARTS:
        a, b = part_ms(off, part), part_ms(on, part)
        if a is None or b is None or (a == 0 and b == 0):
            continue
        noise = widest(noise_pct, (part_noise or {}).get(part.name)) / 100 * max(a, b)
        gain = a - b
        word = WITHIN if abs(gain) <= noise else GAINS if gain > 0 else LOSES
        out.append(PartResult(part, a, b, gain, noise, word, part_compile_s(off, on, part)))
    return out


@dataclass(frozen=True)
class Advice:
    results: list[PartResult]
    turn_on: list[PartResult]  # the parts that gain beyond noise
    settings: tuple[str, ...]  # the overrides that run it (autotune=off plus these; ("autotune=on",) for both)
    kept_pct: float | None  # the share of the summed gains the advised parts keep
    compile_s: float | None  # their compile seconds
    full_compile_s: float | None  # the on twin's extra compile over the off twin's
    payback_steps: float | None


def advise(off: Mapping, on: Mapping, noise_pct: float = RERUN_DEVICE_PCT,
           part_noise: Mapping[str, float] | None = None) -> Advice | None:
    """The advice for a pair of jobs-table rows (autotune off, on); None without category
    shares in both. No payback where the on twin's compile was not cold: its seconds are
    what that compile spent, not what a cold one costs (a seeded compile's 5 s said "paid
    back after 0 steps")."""
    results = parts(off, on, noise_pct, part_noise)
    if not results:
        return None
    gaining = [r for r in results if r.word == GAINS]
    full = None
    c_on, c_off = as_float(on.get("compile_s")), as_float(off.get("compile_s"))
    if c_on is not None and c_off is not None:
        full = max(0.0, c_on - c_off)
    if not gaining:
        return Advice(results, [], ("autotune=off",), None, None, full, None)
    every = sum(max(r.gain_ms, 0.0) for r in results)
    kept = sum(r.gain_ms for r in gaining)
    if len(gaining) == len(PARTS):
        settings: tuple[str, ...] = ("autotune=on",)
        cost = full
    else:
        settings = ("autotune=off", *(s for r in gaining for s in r.part.settings))
        costs = [r.compile_s for r in gaining]
        cost = None if any(c is None for c in costs) else sum(c or 0.0 for c in costs)
    payback = cost * 1000 / kept if cost is not None and kept > 0 and cold(on) else None
    return Advice(results, gaining, settings, 100 * kept / every if every else None, cost, full, payback)
