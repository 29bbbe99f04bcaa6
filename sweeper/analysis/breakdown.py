"""Where the device time goes: per-category totals, kernel tables, busy percentages (pure).

Three busy figures are kept side by side, because they answer different questions:

* ``busy_pct``, the one to read: the union of kernel intervals per run (overlapping kernels
  on several streams count once) over the *unprofiled* wall time per run. It is the share
  of the step, as it runs without a profiler, in which some kernel runs. Never above 100%:
  where noise between the profiled and the unprofiled runs puts it above, it is capped and
  ``busy_capped`` says so (``busy_pct_uncapped`` keeps the figure).
* ``busy_pct_reference_style``: summed kernel time per run over the same unprofiled wall
  time, which is what ``python <module>.py -p`` prints. It can exceed 100% (kernels on
  several streams, or the profiler stretching kernels), and is kept to compare with it.
* ``busy_pct_profiled_span``: the union over the profiled span. The profiler slows the
  host's launches, so on launch-bound work this is a lower bound of the unprofiled
  figure; it stays in the record for what it is.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any, Iterable, Mapping, Sequence

from sweeper.analysis.categories import CATEGORIES, REFERENCE_CATEGORIES, categorize, reference_category
from sweeper.analysis.trace import Interval, clip, union_us


def spread(values: Sequence[float]) -> dict:
    """Median and spread of repeated measurements (min, max, interquartile range, CV)."""
    vals = sorted(float(v) for v in values)
    if not vals:
        raise ValueError("spread() of no measurements")
    med = statistics.median(vals)
    if len(vals) >= 4:
        q1, _, q3 = statistics.quantiles(vals, n=4)
    else:
        q1, q3 = vals[0], vals[-1]
    k = len(vals) // 10  # a tenth off each end: a stalled round moves the mean no more than the median
    return {
        "median": med,
        "trimmed_mean": statistics.fmean(vals[k:len(vals) - k]),
        "min": vals[0],
        "max": vals[-1],
        "iqr": q3 - q1,
        # relative spread: (max - min) / median, in percent
        "range_pct": (vals[-1] - vals[0]) / med * 100 if med else 0.0,
        "n": len(vals),
        # in the order measured: shows a stall, a drift or two levels that the summary hides
        "values": [round(float(v), 4) for v in values],
    }


def wall_figure(wall_ms: Mapping[str, Any]) -> float:
    """The one wall time a module's percentages divide by: the trimmed mean of its rounds.
    Why not the median: on the H200 VM the host's launch speed switches between two
    levels every few seconds, so a launch-bound module's rounds fall in two groups, and
    their median jumps from one group to the other as the mix passes one half, where the
    mean moves with the mix (docs/findings.md). Records written before
    the trimmed mean existed give their median."""
    return wall_ms.get("trimmed_mean", wall_ms["median"])


def profiled_span(
    kernels: Sequence[Interval], ranges: Sequence[tuple[float, float]]
) -> tuple[float, float] | None:
    """The span of profiled work: from the start of the first annotated host range to the
    end of whatever finished last (host range or kernel)."""
    if not ranges:
        if not kernels:
            return None
        return kernels[0].start_us, max(k.end_us for k in kernels)
    start = ranges[0][0]
    end = max(r[1] for r in ranges)
    later = [k.end_us for k in kernels if k.end_us > start]
    if later:
        end = max(end, max(later))
    return start, end


def _add_span_busy(result: dict, kernels: list[Interval], span: tuple[float, float], runs: int) -> None:
    """The busy figures of the kernel intervals' union within the profiled span."""
    start, end = span
    busy_us = union_us(clip(kernels, start, end))
    result["span_ms"] = (end - start) / 1000
    result["busy_ms"] = busy_us / 1000 / runs
    result.update(busy_figures(result["busy_ms"], result["busy_wall_ms"]))
    result["busy_pct_profiled_span"] = busy_us / (end - start) * 100 if end > start else None


def breakdown(
    kernels: Iterable[Interval],
    runs: int,
    span: tuple[float, float] | None = None,
    wall_ms: float | None = None,
    busy_wall_ms: float | None = None,
    host_timed: bool = False,
    run_of: list[int] | None = None,
) -> dict:
    """Per-category totals and the kernel table of `runs` profiled runs.

    Times are per run (divided by `runs`). `span` (the profiled span) bounds the kernel
    intervals whose union gives the busy figures; `wall_ms` (unprofiled wall time of one
    run) is what the reference-style figures divide by, and busy_pct too unless
    `busy_wall_ms` is given: the step's mean over a steady loop of several seconds
    (tasks/timing.steady_loop), which averages the host's launch-speed levels.

    `host_timed` (a CPU job: its "kernels" are host ops, timed on the host while the
    profiler runs): the profiler slows the very work it times there (resnet18 on a 2-core
    CPU: a profiled forward took 310 ms a call against 101 ms unprofiled), so the profiled
    times are scaled to the unprofiled run (to_unprofiled): a breakdown never exceeds the
    time it breaks down. GPU kernels run at their own speed under the profiler: no scaling.
    """
    if runs <= 0:
        raise ValueError("runs must be positive")
    kernels = list(kernels)
    device_ms = sum(k.dur_us for k in kernels) / 1000 / runs

    def pct_of_wall(ms: float) -> float | None:
        return ms / wall_ms * 100 if wall_ms else None

    rows = kernel_rows(kernels, runs, device_ms, pct_of_wall, run_of)
    ordered = category_totals(rows, device_ms, pct_of_wall)
    reference = {name: 0.0 for name in REFERENCE_CATEGORIES}
    for cat, c in ordered.items():
        reference[reference_category(cat)] += c["device_ms"]

    result = {
        "runs": runs,
        "device_ms": device_ms,
        "kernel_launches": len(kernels) / runs,
        "categories": ordered,
        # shares of device time in the -p harness's five categories
        "reference_categories_share_pct": {
            k: (v / device_ms * 100 if device_ms else 0.0) for k, v in reference.items()
        },
        "wall_ms": wall_ms,
        "busy_pct_reference_style": pct_of_wall(device_ms),
        "busy_ms": None,
        "busy_wall_ms": busy_wall_ms or wall_ms,
        **busy_figures(None, wall_ms),
        "busy_pct_profiled_span": None,
        "span_ms": None,
        "kernels": rows,
    }
    if span is not None:
        _add_span_busy(result, kernels, span, runs)
    if host_timed:  # bounded by the shorter of the unprofiled walls, so within both
        to_unprofiled(result, min((w for w in (busy_wall_ms, wall_ms) if w), default=None), wall_ms)
    return result


def to_unprofiled(result: dict, reference_ms: float | None, wall_ms: float | None) -> None:
    """A host-timed breakdown's times, in place, as shares of the profiled run times the
    unprofiled run's wall time (`reference_ms`): each time is multiplied by
    `profiled_scale` = reference / (profiled time per run: the span, or the summed op
    time where ops on several threads overlap), at most 1, so that no category, kernel or
    sum exceeds the wall time it is a part of. Shares stay as they are; the profiled
    figures stay beside (`device_ms_profiled`)."""
    per_run = max((result["span_ms"] or 0.0) / result["runs"], result["device_ms"])
    scale = min(1.0, reference_ms / per_run) if reference_ms and per_run > 0 else 1.0
    result["device_ms_profiled"] = result["device_ms"]
    # four significant digits, not decimals: on a loaded host the profiled run was ~30x slower
    # (scale 0.03), and 4 decimals put the figure 0.16% off the times it scaled
    result["profiled_scale"] = float(f"{scale:.4g}")
    if scale == 1.0:
        return

    def pct(ms: float) -> float | None:
        return ms / wall_ms * 100 if wall_ms else None

    result["device_ms"] *= scale
    for row in [*result["kernels"], *result["categories"].values()]:
        row["device_ms"] *= scale
        row["pct_of_wall"] = pct(row["device_ms"])
        if row.get("typical_ms") is not None:
            row["typical_ms"] *= scale
    result["busy_pct_reference_style"] = pct(result["device_ms"])
    if result["busy_ms"] is not None:
        result["busy_ms"] *= scale
        result.update(busy_figures(result["busy_ms"], result["busy_wall_ms"]))


def kernel_rows(kernels: list[Interval], runs: int, device_ms: float, pct_of_wall,
                run_of: list[int] | None = None) -> list[dict]:
    """One row per kernel name: its category, time and launches per run, shares; with
    `run_of`, its typical time (the median call's) and outlier calls. Costliest first, by
    the typical time where there is one."""
    from sweeper.analysis.trace import per_run, typical

    per_kernel: dict[tuple[str, str], list[float]] = defaultdict(list)
    calls: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, k in enumerate(kernels):
        key = (k.name, categorize(k.name, k.cat))
        per_kernel[key].append(k.dur_us)
        if run_of is not None:
            calls[key].append(run_of[i])
    rows = []
    for (name, category), durs in per_kernel.items():
        ms = sum(durs) / 1000 / runs
        row = {"name": name, "category": category, "device_ms": ms, "count": len(durs) / runs,
               "share_of_device_pct": ms / device_ms * 100 if device_ms else 0.0,
               "pct_of_wall": pct_of_wall(ms)}
        if run_of is not None:
            row["typical_ms"], row["outlier_runs"] = typical(per_run(durs, calls[(name, category)], runs))
        rows.append(row)
    rows.sort(key=lambda r: r.get("typical_ms", r["device_ms"]), reverse=True)
    return rows


def category_totals(rows: list[dict], device_ms: float, pct_of_wall) -> dict[str, dict]:
    """Per category, in CATEGORIES order: device time, distinct kernels, launches, shares."""
    categories: dict[str, dict] = {}
    for row in rows:
        c = categories.setdefault(row["category"], {"device_ms": 0.0, "kernels": 0, "launches": 0.0})
        c["device_ms"] += row["device_ms"]
        c["kernels"] += 1
        c["launches"] += row["count"]
    ordered = {}
    for cat in list(CATEGORIES) + sorted(set(categories) - set(CATEGORIES)):
        if cat in categories:
            c = categories[cat]
            c["share_of_device_pct"] = c["device_ms"] / device_ms * 100 if device_ms else 0.0
            c["pct_of_wall"] = pct_of_wall(c["device_ms"])
            ordered[cat] = c
    return ordered


def busy_figures(busy_ms: float | None, wall_ms: float | None) -> dict:
    """busy_pct: the union of kernel intervals per run (`busy_ms`) over the unprofiled wall
    time per run, capped at 100 (with busy_capped true and the uncapped figure beside it):
    the profiled and the unprofiled runs are different runs, so on a step that keeps the
    device busy throughout, noise can put the ratio a little over 100."""
    if busy_ms is None or not wall_ms:
        return {"busy_pct": None, "busy_pct_uncapped": None, "busy_capped": False}
    pct = busy_ms / wall_ms * 100
    return {"busy_pct": min(pct, 100.0), "busy_pct_uncapped": pct, "busy_capped": pct > 100.0}


# NVML's utilization counts about a microsecond of each kernel launch besides the kernel's
# own run (bench/nvml_probe.py: 0.5 to 1.1 µs a kernel, back to back or apart). Over 19 H200
# jobs the busy figure plus 1 µs a launch, at most 100, was within 3.4 points of NVML
# (bench/results/busy/nvml_expected.md).
NVML_US_PER_LAUNCH = 1.0


def nvml_expected_pct(busy_pct: float | None, launches: float | None, step_ms: float | None,
                      us_per_launch: float = NVML_US_PER_LAUNCH) -> float | None:
    """What NVML's utilization should read for a step whose kernels run `busy_pct` of its
    `step_ms`, with `launches` kernel launches a step: each launch adds about
    `us_per_launch` of GPU time that the kernels' own intervals leave out. At most 100: on
    a step whose gaps are shorter than that (CUDA graphs), NVML counts them all busy."""
    import math

    if busy_pct is None or launches is None or step_ms is None:
        return None
    if any(math.isnan(v) for v in (busy_pct, launches, step_ms)) or step_ms <= 0:
        return None
    return min(100.0, busy_pct + launches * us_per_launch / 1000.0 / step_ms * 100.0)
