"""One series' change points and their test (pure): the constants of the change detector,
a kernel's family, a change and a candidate change, a series' noise, KernelCPD's cuts, a
job's own series tested at a cut, and Benjamini-Hochberg over every tested cut. The method
as a whole: sweeper/analysis/changes.py; a family's test over its jobs:
sweeper/analysis/family_changes.py."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from sweeper.analysis.drift import drift_of

VERDICTS = ("accuracy", "status")  # changes that are a verdict (passed -> failed, ok -> failed or missing), not a size
WINDOW = 6  # the last nights whose changes --fail-on-regression and the report call recent (HUD's 6 days)
BASELINE = 5  # nights before a change that its test needs, at least (a shorter baseline is one preempted night from a flag)
TEST_NIGHTS = 12  # nights before (and after) a cut that its test reads, at most (up to the next cut)
PERSIST = 3  # nights a change must hold, its first included
PENALTY = 3.0  # the cut's penalty, in noise variances x log(nights): calibrated on A/A histories (bench/change_detection.py)
FDR_Q = 0.01  # false discovery rate over every tested cut (Benjamini-Hochberg)
MIN_NOISE = 0.002  # a series' noise at least this (log units, 0.2%): nights of identical figures are not noiseless
MIN_JOBS = 3  # a family pooled over fewer jobs is judged job by job only
MIN_TOUCHED = 3  # a family's change moves at least this many jobs beyond 3x their noise (fewer: a job's change)
CLIP = 10.0  # a night of one job counts at most this many noise widths in the family's mean

# The least change worth a flag, relative, by what the series is
FLOOR = {"category": 0.005, "family": 0.005, "kernels": 0.02, "step": 0.03, "compile": 0.15, "memory": 0.05}
# Series whose nights have one spread before and after a change (no second config, no
# neighbour's share): their test pools both windows' spread (Student's t, n-2 degrees of
# freedom); Welch's, which the kernel and step series need, has the few nights after a late
# change for its spread and misses a compile 20% slower on its 4th last night (the change
# detector's bench: compile recall 39 of 40, was 38, at the same A/A rate).
ONE_SPREAD_LEVELS = ("compile", "memory")
STEP_BUSY_PCT = 60.0  # a job's step time is judged only where its GPU was this busy (the step follows its kernels)


_NUMBER = re.compile(r"_\d+$")
_CPP_GRAPH = re.compile(r"^graph_\d+_")


@functools.lru_cache(maxsize=None)
def family_of(kernel: str) -> str:
    """A kernel's family across jobs: a generated kernel's name without Inductor's number
    (and a C++ kernel's graph prefix); a library kernel's own name. Cached: a history of
    1,000 jobs asks it millions of times of a few thousand names."""
    name = _CPP_GRAPH.sub("", str(kernel))
    if name.startswith(("triton_", "cpp_fused", "cpp_kernel")):
        return _NUMBER.sub("", name)
    return name


@dataclass
class Change:
    """One change point of one series."""

    level: str  # category | family | kernels | step | compile | memory | accuracy
    name: str  # the family or category, or the job's label
    night: int  # index of the first night it holds
    size_pct: float  # the change, % (positive: slower, larger)
    ci_pct: tuple[float, float]
    p_value: float
    jobs: tuple[str, ...]  # the jobs it touches (beyond their noise), or the job
    jobs_running: int  # jobs whose series it is
    evidence: str
    q_value: float = float("nan")
    modules: tuple[str, ...] = ()
    moved_share: float = float("nan")  # a pooled change: the share of its jobs it moved, by the mixture estimate
    significant: int = 0  # of `jobs`, those that moved beyond their noise alone (a pooled change's)
    drift_pct: float = float("nan")  # a drift (sweeper/analysis/drift.py): % a night; size_pct is over its nights

    @property
    def direction(self) -> str:
        return "slower" if self.size_pct > 0 else "faster"


@dataclass
class Candidate:
    level: str
    name: str
    night: int
    size: float  # log units
    ci: tuple[float, float]
    p: float
    jobs: tuple[str, ...]
    running: int
    evidence: str
    extra: dict = field(default_factory=dict)


def noise_of(y: np.ndarray) -> float:
    """A series' noise (log units): 1.4826 x the median absolute successive difference / sqrt(2)."""
    d = np.diff(y[~np.isnan(y)])
    if len(d) < 2:
        return MIN_NOISE
    return max(float(1.4826 * np.median(np.abs(d)) / math.sqrt(2)), MIN_NOISE)


def cuts(series: np.ndarray, penalty: float = PENALTY) -> list[int]:
    """The nights where a new level starts in a standardised series (NaN nights dropped and
    put back), by ruptures' KernelCPD with a linear kernel (a least-squares step fit) and
    a penalty of `penalty` x log(nights)."""
    import ruptures as rpt

    keep = np.flatnonzero(~np.isnan(series))
    if len(keep) < 2 * PERSIST + 1:
        return []
    x = series[keep].reshape(-1, 1)
    found = rpt.KernelCPD(kernel="linear", min_size=PERSIST).fit(x).predict(pen=penalty * math.log(len(keep)))
    return [int(keep[b]) for b in found[:-1]]  # the last is the series' end


def windows(t: int, cut_list: Sequence[int], n: int) -> tuple[slice, slice]:
    before = [c for c in cut_list if c < t]
    after = [c for c in cut_list if c > t]
    lo = max(before[-1] if before else 0, t - TEST_NIGHTS)
    hi = min(after[0] if after else n, t + TEST_NIGHTS)
    return slice(lo, t), slice(t, hi)


def job_candidates(level: str, job: str, values: np.ndarray, penalty: float = PENALTY) -> list[Candidate]:
    """One job's candidate changes of one series (ms, MiB or s a night; NaN where missing)."""
    from scipy import stats

    y = np.log(np.where(values > 0, values, np.nan))
    if np.sum(~np.isnan(y)) < 2 * PERSIST + 1:
        return []
    noise = noise_of(y)
    d = drift_of(y, PERSIST)
    if d is not None:  # one drift, not a cut at every few nights
        first = int(np.flatnonzero(~np.isnan(y))[0])
        return [Candidate(level, job, first, d.slope * (d.nights - 1), (d.slope * (d.nights - 1),) * 2, d.p, (job,), 1,
                          f"a drift of {d.per_night_pct:+.2f}% a night over {d.nights} nights (Kendall's tau "
                          f"p={d.p:.2g}; a line fits the nights better than any step)", extra={"drift": d})]
    found = cuts((y - np.nanmedian(y)) / noise, penalty)
    out = []
    for t in found:
        pre, post = windows(t, found, len(y))
        a, b = y[pre][~np.isnan(y[pre])], y[post][~np.isnan(y[post])]
        if len(b) < PERSIST or len(a) < BASELINE:
            continue
        shift = float(np.median(b) - np.median(a))
        # the larger of the series' noise and the windows' own spread: a noise told from few
        # nights can come out low, and an interval from it alone too narrow
        spread = math.sqrt(float(np.var(a, ddof=1)) / len(a) + (float(np.var(b, ddof=1)) / len(b) if len(b) > 1 else 0))
        se = max(noise * math.sqrt(1 / len(a) + 1 / len(b)), spread)
        t_stat = (stats.ttest_ind(b, a, equal_var=level in ONE_SPREAD_LEVELS) if len(a) >= 2 and len(b) >= 2
                  else None)
        p_t = float(t_stat.pvalue) if t_stat is not None and np.isfinite(t_stat.pvalue) else 1.0
        p_z = 2 * stats.norm.sf(abs(shift) / se)
        positions = max(1, len(y) - 2 * PERSIST + 1)  # the price of choosing the cut
        out.append(Candidate(level, job, t, shift, (shift - 1.96 * se, shift + 1.96 * se),
                             min(1.0, max(p_t, p_z) * positions), (job,), 1,
                             f"KernelCPD cut at this night; {'Student' if level in ONE_SPREAD_LEVELS else 'Welch'} "
                             f"t-test of the nights p={p_t:.2g}, shift against "
                             f"its noise ({100 * noise:.2f}% a night) p={p_z:.2g} (the larger, x{positions} cut "
                             f"positions)"))
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """q-values of p-values (Benjamini-Hochberg: scipy's false_discovery_control)."""
    from scipy import stats

    p = np.asarray(p_values, dtype=float)
    return p if not len(p) else stats.false_discovery_control(p)
