"""Change points over a nightly history (pure: numbers in, changes out; `python -m
sweeper.history changes`, docs/method.md "Change points over the nightly history").

What is judged, where the noise is lowest:
- a **kernel family** in every job that runs it: its kernel time a step (the kernels whose
  names differ only by Inductor's number, `triton_red_fused_native_batch_norm_backward_*`,
  or one library kernel), and a **category** (every Triton reduction of a job), pooled over
  the jobs: a 1-4% change of a family shared by many jobs, which no single job shows beyond
  its noise, moves them all the same way;
- each **job**'s kernel time a step, its step time where the GPU is busy enough for the step
  to follow its kernels (busy_pct >= STEP_BUSY_PCT), its compile time and peak memory, each
  with a floor of its own (HUD's: compile latency 15%, memory 5%), and its check against
  eager (passed -> failed is a change by itself).

How a change is found (a locator proposes a night, a test judges it, and it must hold):
1. *Where*: two locators. KernelCPD from ruptures (PELT over a linear kernel: a
   least-squares step fit) cuts the series (a job's, or for a family the mean over its jobs
   of each job's nights in units of its own noise) with a BIC-like penalty (PENALTY x log
   of the nights). For a family, also the jobs' scan (job_scan): nights where at least
   MIN_TOUCHED of its jobs step the same way, which a mean over 100 jobs hides when 5 moved.
   ruptures was chosen over Apache Otava (a wheel, but pinning old versions of its needs
   and bringing heavy ones), signal-processing-algorithms (E-divisive, a source
   distribution with a build step) and asv's step detector (inside asv, not a library of
   its own): a maintained wheel with several detectors, whose KernelCPD runs in
   C (6 us a 30-night series: a 1,000-job history of 30 nights is thousands of series).
2. *Whether*: at a proposed night, the nights before it (at least BASELINE, up to
   TEST_NIGHTS or the cut before) against those after (up to TEST_NIGHTS or the next cut).
   For a family, each job's one-sided Welch test of its nights in noise widths, each night
   clipped at SCAN_CLIP (a preempted night is one night, not a change), combined over the
   jobs by Fisher's method, with at least MIN_TOUCHED jobs moved (p < MOVED_P each); the
   change's size where it happened from a two-group mixture of the jobs' shifts (unmoved
   and moved: the moved jobs alone overstate a small change), its interval by resampling
   the jobs; the shift over all the jobs by a random-effects model (DerSimonian-Laird) in
   the evidence. For a job, a t-test of the nights themselves (Welch's; Student's for compile
   time and peak memory, ONE_SPREAD_LEVELS) and its shift against its noise, the larger p
   counting. A p-value is multiplied by the positions a cut could
   have taken (choosing one makes any look significant); every proposed night of every
   series is one test, and the false discoveries over all of them are held at FDR_Q by
   Benjamini-Hochberg. A change needs at least PERSIST nights after its first; one in the
   first BASELINE nights read is not judged (too short a baseline).

The noise of a series is its own: the median absolute difference of successive nights
(robust to the step it may hold), so a family with noisy kernels needs a larger change.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from sweeper.analysis.drift import drift_of, episodes

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


def _windows(t: int, cut_list: Sequence[int], n: int) -> tuple[slice, slice]:
    before = [c for c in cut_list if c < t]
    after = [c for c in cut_list if c > t]
    lo = max(before[-1] if before else 0, t - TEST_NIGHTS)
    hi = min(after[0] if after else n, t + TEST_NIGHTS)
    return slice(lo, t), slice(t, hi)


def _dersimonian_laird(r: np.ndarray, v: np.ndarray) -> tuple[float, float, float]:
    """(pooled effect, its standard error, between-job variance) of shifts `r` with variances `v`."""
    w = 1 / v
    mu_f = float(np.sum(w * r) / np.sum(w))
    q = float(np.sum(w * (r - mu_f) ** 2))
    c = float(np.sum(w) - np.sum(w ** 2) / np.sum(w))
    tau2 = max(0.0, (q - (len(r) - 1)) / c) if c > 0 else 0.0
    w2 = 1 / (v + tau2)
    mu = float(np.sum(w2 * r) / np.sum(w2))
    return mu, math.sqrt(1 / float(np.sum(w2))), tau2


def pooled_candidates(level: str, name: str, matrix: np.ndarray, jobs: Sequence[str],
                      penalty: float = PENALTY) -> list[Candidate]:
    """A family's candidate changes: `matrix` is jobs x nights of its kernel time a step (ms,
    NaN where a job did not run it).

    Each job in units of its own noise, the jobs averaged night by night (clipped, so that
    one preempted kernel cannot make a night; not trimmed, so that a change in a few jobs
    still moves the mean): the cuts of that series are where. At each, every job's one-sided
    p-value of its shift in the cut's direction, combined by Fisher's method (a change in 5
    of 70 jobs is a change of the family, as a mean over them would hide), with at least
    MIN_TOUCHED jobs beyond 3x their noise; and the shift over all the jobs by a random-effects
    model (DerSimonian-Laird), its interval the size of a change shared by all."""
    from scipy import stats

    y = np.log(np.where(matrix > 0, matrix, np.nan))
    ok = np.sum(~np.isnan(y), axis=1) >= 2 * PERSIST + 1
    y, jobs = y[ok], [j for j, k in zip(jobs, ok) if k]
    if len(jobs) < MIN_JOBS:
        return []
    noise = np.array([noise_of(row) for row in y])
    drifting = _pooled_drift(level, name, y, jobs)
    if drifting:  # the family drifts: one drift, not a cut at every few nights
        return drifting
    z = np.clip((y - np.nanmedian(y, axis=1, keepdims=True)) / noise[:, None], -CLIP, CLIP)
    with np.errstate(all="ignore"):
        pooled = np.nanmean(z, axis=0)
    found = cuts(pooled / noise_of(pooled) if np.isfinite(pooled).sum() > 3 else pooled, penalty)
    scanned = job_scan(z)
    out: list[Candidate] = []
    n = y.shape[1]
    positions = max(1, n - 2 * PERSIST + 1)  # where a cut could have been put: the test's price for choosing one
    for t in sorted(set(found) | set(scanned)):
        how = ("KernelCPD cut of the jobs' mean" if t in found else "the jobs' scan") + \
            (" and the jobs' scan" if t in found and t in scanned else "")
        around = sorted(set(found) | {t})
        first = _at(t, around, y, noise, pooled, scanned.get(t))
        if first is None:
            continue
        refined = _refined(t, around, first[-1], y, noise)  # the cut of the jobs' mean, told by the jobs it moved
        got = _at(refined, sorted({f for f in around if f != t} | {refined}), y, noise, pooled, first[3])
        if got is None:
            continue
        t = refined
        r, v, one_sided, sign, use, _ = got
        if any(c.night == t and c.size * sign > 0 for c in out):
            continue  # both locators found it
        p_fisher = float(stats.combine_pvalues(np.clip(one_sided, 1e-300, 1.0), method="fisher").pvalue)
        mu, se, tau2 = _dersimonian_laird(r, v)
        used = [j for j, u in zip(jobs, use) if u]
        moved = one_sided < MOVED_P
        touched = tuple(j for j, m in zip(used, moved) if m)
        p = min(1.0, p_fisher * positions)
        fit = _moved_fit(r, v, sign, moved, p)
        if fit is None:
            continue
        start, size, share = fit
        out.append(Candidate(level, name, t, size, (size, size), p, _named(used, r, v, size, share, touched),
                             int(use.sum()),
                             f"{how} at this night; Fisher's combination of the "
                             f"{int(use.sum())} jobs' shifts p={p_fisher:.2g} (x{positions} cut positions); "
                             f"{len(touched)} jobs moved (Welch p < {MOVED_P:g} each); the change where it happened from "
                             f"a two-group mixture (about {100 * share:.0f}% of the jobs moved); shift over all the jobs "
                             f"{100 * math.expm1(mu):+.2f}% (random effects, 95% CI {100 * math.expm1(mu - 1.96 * se):+.2f} "
                             f"to {100 * math.expm1(mu + 1.96 * se):+.2f}%, between-job sd {100 * math.sqrt(tau2):.2f}%)",
                             extra={"shifts": (r, v, start), "significant": len(touched)}))
    return out


def _pooled_drift(level: str, name: str, y: np.ndarray, jobs: Sequence[str]) -> list[Candidate]:
    """A family that drifts (sweeper/analysis/drift.py) as one candidate, else none."""
    with np.errstate(all="ignore"):
        d = drift_of(np.nanmean(y - np.nanmedian(y, axis=1, keepdims=True), axis=0), PERSIST)
    if d is None:
        return []
    size = d.slope * (d.nights - 1)
    return [Candidate(level, name, 0, size, (size, size), d.p, tuple(jobs), len(jobs),
                      f"a drift of the jobs' mean of {d.per_night_pct:+.2f}% a night over {d.nights} nights "
                      f"(Kendall's tau p={d.p:.2g}; a line fits better than any step)",
                      extra={"drift": d, "significant": len(jobs)})]


def _moved_fit(r: np.ndarray, v: np.ndarray, sign: float, moved: np.ndarray, p: float
               ) -> tuple[float, float, float] | None:
    """(the mixture's start, shift, share moved) of a family's change, or None where it does
    not stand: MIN_TOUCHED jobs beyond 3 widths alone; or, as a 3% change under 2% noise
    leaves it, fewer, where the mixture puts MIN_TOUCHED among the moved and the jobs'
    combination (p, priced by the cut positions) is beyond doubt."""
    if moved.sum() >= MIN_TOUCHED:
        start = float(np.median(r[moved]))
        return (start, *_mixture_fit(r, v, start))
    lead = np.sign(r) == sign
    if not lead.any() or p > POOLED_ONLY_P:
        return None
    start = float(np.median(r[lead]))
    size, share = _mixture_fit(r, v, start)
    if share * len(r) < MIN_TOUCHED or size * sign <= 0:
        return None
    return start, size, share


def posterior(r: np.ndarray, v: np.ndarray, delta: float, share: float) -> np.ndarray:
    """Each job's probability of being among those a change of `delta` moved (the two-group
    mixture of _mixture_fit, at its fit)."""
    sd = np.sqrt(v)
    l1 = share * np.exp(-0.5 * ((r - delta) / sd) ** 2)
    l0 = (1 - share) * np.exp(-0.5 * (r / sd) ** 2)
    return l1 / np.maximum(l0 + l1, 1e-300)


def _named(used: Sequence[str], r: np.ndarray, v: np.ndarray, delta: float, share: float,
           significant: Sequence[str]) -> tuple[str, ...]:
    """The jobs a family's change moved, as named: those the mixture more likely than not
    puts among the moved (a job need not be significant alone: a 3% change under 2% noise
    rarely is), and every one that is."""
    w = posterior(r, v, delta, share)
    return tuple(j for j, p in zip(used, w) if p >= 0.5 or j in significant)


BOOTSTRAP = 200  # resamples of the jobs for the interval of a family's change


def _mixture_fit(r: np.ndarray, v: np.ndarray, start: float) -> tuple[float, float]:
    """(shift, share of jobs moved) of shifts r (variances v) as two groups: jobs unchanged
    (mean 0) and jobs moved by one shift, by EM. The median of the jobs beyond 3x their noise
    alone overstates a small change (those that noise pushed further are the ones chosen:
    1.5% read as 2.5% in 25 of 60 jobs with 1% noise); the mixture counts every job."""
    delta, share = start, 0.5
    sd = np.sqrt(v)
    for _ in range(100):
        l1 = share * np.exp(-0.5 * ((r - delta) / sd) ** 2)
        l0 = (1 - share) * np.exp(-0.5 * (r / sd) ** 2)
        w = l1 / np.maximum(l0 + l1, 1e-300)
        if w.sum() < 1e-9:
            return delta, 0.0
        new = float(np.sum(w * r / v) / np.sum(w / v))
        share = float(np.clip(w.mean(), 1e-3, 1 - 1e-3))
        if abs(new - delta) < 1e-7:
            delta = new
            break
        delta = new
    return delta, share


def mixture_shift(r: np.ndarray, v: np.ndarray, start: float) -> tuple[float, tuple[float, float], float]:
    """A family's change where it happened (log units), its 95% interval (the jobs resampled
    BOOTSTRAP times, each job's shift with its variance: scipy's paired percentile
    bootstrap, a fixed seed, so the same history gives the same answer) and the share of
    jobs it moved."""
    from scipy import stats

    delta, share = _mixture_fit(r, v, start)
    if len(r) < 2:  # one job: nothing to resample
        return delta, (delta, delta), share
    boot = stats.bootstrap((r, v), lambda r_, v_: _mixture_fit(r_, v_, delta)[0], paired=True, vectorized=False,
                           n_resamples=BOOTSTRAP, method="percentile", random_state=np.random.default_rng(0))
    lo, hi = boot.confidence_interval
    return delta, (float(min(lo, delta)), float(max(hi, delta))), share


MIN_VAR = 0.25  # a window's variance at least this (noise widths squared): nights clipped alike are not exact
MOVED_P = 0.00135  # a job moved when its one-sided p is under this (3 sd of a normal)
POOLED_ONLY_P = 1e-8  # a family's change with fewer than MIN_TOUCHED jobs moved alone: its combined p at most this
SCAN_Z = 3.0  # a job steps at a night when its nights after differ from those before by this many noise widths
SCAN_CLIP = 4.0  # a night counts at most this many noise widths in the scan: one preempted night makes no step


def job_scan(z: np.ndarray) -> dict[int, float]:
    """The second locator of a family's change: nights where at least MIN_TOUCHED of its jobs
    step by SCAN_Z noise widths the same way (each job's mean of up to TEST_NIGHTS nights
    after against at least PERSIST before, every night clipped at SCAN_CLIP widths), the most
    at that night of its neighbours; night -> direction (+1 slower). The jobs' mean, which
    KernelCPD cuts, hides a change in 5 of 100 jobs; this does not, and the test at the
    night prices it the same (x cut positions). Sums by cumulative sums: every job and night
    at once (a 1,000-job history has thousands of families' matrices)."""
    jobs, n = z.shape
    c = np.clip(z, -SCAN_CLIP, SCAN_CLIP)
    have = ~np.isnan(c)
    cs = np.concatenate([np.zeros((jobs, 1)), np.cumsum(np.where(have, c, 0.0), axis=1)], axis=1)
    cn = np.concatenate([np.zeros((jobs, 1)), np.cumsum(have, axis=1)], axis=1)
    ts = np.arange(BASELINE, n - PERSIST + 1)
    if not len(ts):
        return {}
    lo, hi = np.maximum(0, ts - TEST_NIGHTS), np.minimum(n, ts + TEST_NIGHTS)
    sa, na = cs[:, ts] - cs[:, lo], cn[:, ts] - cn[:, lo]
    sb, nb = cs[:, hi] - cs[:, ts], cn[:, hi] - cn[:, ts]
    ok = (na >= BASELINE) & (nb >= PERSIST)
    with np.errstate(all="ignore"):
        step = np.where(ok, (sb / nb - sa / na) / np.sqrt(1 / na + 1 / nb), 0.0)
    counts = np.zeros((2, n))
    counts[0, ts], counts[1, ts] = np.sum(step > SCAN_Z, axis=0), np.sum(step < -SCAN_Z, axis=0)
    out: dict[int, float] = {}
    for d, sign in ((0, 1.0), (1, -1.0)):
        k = counts[d]
        for t in ts:
            if k[t] >= MIN_TOUCHED and k[t] >= k[min(n - 1, t + 1)] and k[t] > k[t - 1]:  # a peak, its first night
                out.setdefault(int(t), sign)
    return out


def _at(t: int, found: Sequence[int], y: np.ndarray, noise: np.ndarray, pooled: np.ndarray,
        direction: float | None = None):
    """Each job's shift at cut t (median after - median before, within the windows), its
    variance, z, the cut's direction, the jobs used and the rows beyond 3x their noise; None
    where the windows are too short or too few jobs ran on both sides."""
    n = y.shape[1]
    pre, post = _windows(t, found, n)
    if post.stop - post.start < PERSIST or pre.stop - pre.start < BASELINE:
        return None
    a, b = y[:, pre], y[:, post]
    npre, npost = np.sum(~np.isnan(a), axis=1), np.sum(~np.isnan(b), axis=1)
    use = (npre >= BASELINE) & (npost >= PERSIST)  # medians of 3 or more: one preempted night moves none
    if use.sum() < MIN_JOBS:
        return None
    with np.errstate(all="ignore"):
        r = np.nanmedian(b[use], axis=1) - np.nanmedian(a[use], axis=1)
    v = noise[use] ** 2 * (1 / npre[use] + 1 / npost[use]) * (math.pi / 2)  # a median's variance
    # the evidence: the nights in noise widths, each clipped at SCAN_CLIP (a night preempted
    # twice in a short window made a 30-width "shift" and a family's p of 1e-177 on A/A nights)
    zc = np.clip((y[use] - np.nanmedian(y[use], axis=1, keepdims=True)) / noise[use, None], -SCAN_CLIP, SCAN_CLIP)
    # and held against the windows' own spread (Welch), not the series' noise alone: a noise
    # told from 30 nights can be 40% low, which made three jobs of 22 "move" on A/A nights
    na, nb = npre[use], npost[use]
    with np.errstate(all="ignore"):
        ma, mb = np.nanmean(zc[:, pre], axis=1), np.nanmean(zc[:, post], axis=1)
        va = np.maximum(np.nanvar(zc[:, pre], axis=1, ddof=1), MIN_VAR)
        vb = np.maximum(np.nanvar(zc[:, post], axis=1, ddof=1), MIN_VAR)
        se2 = va / na + vb / nb
        zs = (mb - ma) / np.sqrt(se2)
        df = se2 ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    sign = direction if direction is not None else \
        (1.0 if float(np.nanmean(pooled[post]) - np.nanmean(pooled[pre])) >= 0 else -1.0)
    from scipy import stats

    p_one = stats.t.sf(sign * zs, df)
    return r, v, p_one, sign, use, np.flatnonzero(use)[p_one < MOVED_P]


def _refined(t: int, found: Sequence[int], rows: np.ndarray, y: np.ndarray, noise: np.ndarray) -> int:
    """The night, of t-1, t and t+1, where the jobs that moved (rows) step most: the mean
    over all jobs places a change of a few jobs a night off when a night's noise leans
    (a least-squares step fit of their mean in noise units, within the cut's windows)."""
    if not len(rows):
        return t
    z = np.nanmean((y[rows] - np.nanmedian(y[rows], axis=1, keepdims=True)) / noise[rows, None], axis=0)
    best, score = t, -1.0
    for c in (t - 1, t, t + 1):
        others = [f for f in found if f != t]
        pre, post = _windows(c, others, len(z))
        a, b = z[pre][~np.isnan(z[pre])], z[post][~np.isnan(z[post])]
        if len(a) < BASELINE or len(b) < PERSIST:
            continue
        s = abs(float(b.mean() - a.mean())) * math.sqrt(len(a) * len(b) / (len(a) + len(b)))
        if s > score:
            best, score = c, s
    return best


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
        pre, post = _windows(t, found, len(y))
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


def decide(candidates: Sequence[Candidate], q: float = FDR_Q) -> list[Change]:
    """The candidates that stand: q-value under `q` and a change at least its level's floor."""
    qs = benjamini_hochberg([c.p for c in candidates])
    out = []
    for c, qv in zip(candidates, qs):
        size = math.expm1(c.size)
        if qv > q or abs(size) < FLOOR.get(c.level, 0.0):
            continue
        share, significant = float("nan"), c.extra.get("significant", len(c.jobs))
        if "shifts" in c.extra:  # a family's interval: the jobs resampled, for those that stand only
            c.size, c.ci, share = mixture_shift(*c.extra["shifts"])
            size = math.expm1(c.size)
            significant = c.extra["significant"]
        out.append(Change(c.level, c.name, c.night, 100 * size, (100 * math.expm1(c.ci[0]), 100 * math.expm1(c.ci[1])),
                          c.p, c.jobs, c.running, c.evidence, q_value=float(qv), moved_share=share,
                          significant=significant,
                          drift_pct=c.extra["drift"].per_night_pct if "drift" in c.extra else float("nan")))
    return out


@dataclass
class History:
    """A nightly history in arrays: the nights' names in order, and per series its values a
    night (NaN where missing)."""

    nights: list[str]
    jobs: list[str]  # job keys
    labels: dict[str, str]  # job key -> label
    # (level, name) -> jobs x nights, for pooled levels (category, family)
    pooled: dict[tuple[str, str], tuple[list[str], np.ndarray]] = field(default_factory=dict)
    # (level, job key) -> nights, for per-job levels (kernels, step, compile, memory)
    per_job: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    accuracy: dict[str, list[str | None]] = field(default_factory=dict)  # job key -> passed/failed a night
    versions: list[dict[str, str]] = field(default_factory=list)  # a night's versions (torch, triton, ...)
    modules: dict[str, tuple[str, ...]] = field(default_factory=dict)  # family -> model modules it computes
    family_category: dict[str, str] = field(default_factory=dict)  # family -> its kernels' category
    status: dict[str, list[str | None]] = field(default_factory=dict)  # job key -> its status a night (None: not run)
    # per night, what the jobs' records say of the machine (median over the jobs): sm_clock_mhz,
    # host_busy_cores, slowed_rounds (sweeper/analysis/night_noise.explain)
    machine: dict[str, np.ndarray] = field(default_factory=dict)
    cleaned: Any = None  # night_noise.Cleaned: what find_changes took out before its tests


def find_changes(history: History, penalty: float = PENALTY, q: float = FDR_Q) -> list[Change]:
    """Every change of the history, families and categories first, then jobs, each list by
    size; accuracy changes (passed -> failed) are not tested, they stand."""
    from sweeper.analysis import night_noise

    judged, history.cleaned = night_noise.clean(history)  # machine nights and two-config kernels out first
    candidates: list[Candidate] = []
    for (level, name), (jobs, matrix) in judged.pooled.items():
        candidates += pooled_candidates(level, name, matrix, jobs, penalty)
    for (level, job), values in judged.per_job.items():
        candidates += job_candidates(level, job, values, penalty)
    changes, history.cleaned.episodes = episodes(
        decide(candidates, q), lambda key: noise_of(np.log(judged.per_job[key])) if key in judged.per_job else 0.0)
    changes += status_changes(history)
    for job, verdicts in history.accuracy.items():
        for t in range(1, len(verdicts)):
            if verdicts[t - 1] == "passed" and verdicts[t] == "failed":
                changes.append(Change("accuracy", job, t, float("nan"), (float("nan"), float("nan")), 0.0, (job,), 1,
                                      "its check against eager passed the night before and fails from this one"))
    for c in changes:
        if c.level == "family":
            c.modules = history.modules.get(c.name, ())
    order = {"status": 0, "accuracy": 0, "category": 1, "family": 2, "kernels": 3, "step": 4, "compile": 5, "memory": 6}
    return sorted(changes, key=lambda c: (order.get(c.level, 9), -abs(c.size_pct) if c.size_pct == c.size_pct else 0))


def status_changes(history: History) -> list[Change]:
    """A job that ran ok one night and failed, or was not in the next night's sweep: a change
    by itself (not tested), as a check against eager that starts failing."""
    out = []
    for job, seq in history.status.items():
        for t in range(1, len(seq)):
            if seq[t - 1] == "ok" and seq[t] != "ok":
                what = seq[t] or "missing"
                out.append(Change("status", job, t, float("nan"), (float("nan"), float("nan")), 0.0, (job,), 1, what))
    return out


def versions_between(history: History, night: int) -> dict[str, tuple[str, str]]:
    """What changed between the last night before `night` and `night`: name -> (before, after)."""
    if night <= 0 or night >= len(history.versions):
        return {}
    a, b = history.versions[night - 1], history.versions[night]
    return {k: (a.get(k, "?"), b.get(k, "?")) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


def build_history(nights: Sequence[tuple[str, Any, Any]], modules_of: Mapping[str, Iterable[str]] | None = None
                  ) -> History:
    """A History from each night's (name, jobs table, step kernels table), oldest first (the
    tables as the aggregate writes them: tables.JOB_COLUMNS and the step's rows of
    KERNEL_COLUMNS)."""
    import pandas as pd

    names = [n for n, _, _ in nights]
    n = len(names)
    job_rows, fam_rows = [], []
    ids: dict[str, dict[str, int]] = {"key": {}, "family": {}, "category": {}}
    versions = []
    status: dict[str, list[str | None]] = {}
    all_labels: dict[str, str] = {}
    for t, (_, night_jobs, kernels) in enumerate(nights):
        for key, st, label in zip(night_jobs["key"], night_jobs["status"], night_jobs.get("label", night_jobs["key"])):
            row = status.setdefault(str(key), [None] * n)
            if row[t] != "ok":  # a repeat that ran ok makes the job ok that night
                row[t] = str(st)
            all_labels.setdefault(str(key), str(label))
        jobs = night_jobs[night_jobs["status"] == "ok"].drop_duplicates("key")
        key_of = dict(zip(jobs["job"], jobs["key"]))
        job_rows.append(jobs.assign(night=t))
        versions.append({col: str(jobs[col].dropna().mode().iloc[0])
                         for col in ("torch", "triton", "cuda", "gpu_driver", "sweeper_version", "python")
                         if col in jobs and jobs[col].notna().any()})
        k = kernels[kernels["job"].isin(key_of)]
        if len(k):
            fam_rows.append(_coded_rows(k, key_of, t, ids))
    jobs_all = pd.concat(job_rows, ignore_index=True) if job_rows else pd.DataFrame()
    labels = dict(zip(jobs_all.get("key", []), jobs_all.get("label", [])))
    history = History(names, sorted(labels), {**all_labels, **labels}, versions=versions, status=status)
    _pooled_series(history, fam_rows, ids, n)
    if len(jobs_all):
        _job_series(history, jobs_all, n)
    history.modules = {f: tuple(m) for f, m in (modules_of or {}).items()}
    return history


def _coded_rows(k, key_of: Mapping, night: int, ids: dict[str, dict[str, int]]):
    """A night's kernel rows as integer codes of names numbered once over the nights, a
    name's family told once (a 1,000-job night has 200,000 rows of 2,000 names; 30 of them
    are held at once)."""
    import pandas as pd

    def codes(values, name, of=lambda u: str(u)):
        got, uniq = pd.factorize(values)
        table = np.array([ids[name].setdefault(of(u), len(ids[name])) for u in uniq], dtype=np.int32)
        return table[got]

    return pd.DataFrame({"night": np.full(len(k), night, dtype=np.int32),
                         "key": codes(k["job"], "key", lambda u: str(key_of[u])),
                         "family": codes(k["kernel"].astype(str), "family", family_of),
                         "category": codes(k["category"].astype(str), "category"),
                         "ms": k["device_ms"].to_numpy(dtype=float)})


def _pooled_series(history: History, fam_rows: list, ids: dict[str, dict[str, int]], n: int) -> None:
    """Each category's and family's jobs x nights, from one wide table (name, job) x night:
    no Python loop over cells."""
    import pandas as pd

    if not fam_rows:
        return
    fams = pd.concat(fam_rows, ignore_index=True)
    name_of = {col: np.array(list(ids[col]), dtype=object) for col in ids}
    firsts = fams.drop_duplicates("family")
    history.family_category = dict(zip(name_of["family"][firsts["family"]], name_of["category"][firsts["category"]]))
    for col in ("category", "family"):
        wide = fams.groupby([col, "key", "night"], sort=True)["ms"].sum().unstack("night").reindex(columns=range(n))
        names_idx = wide.index.get_level_values(0).to_numpy()
        values = wide.to_numpy(dtype=float)
        keys_idx = name_of["key"][wide.index.get_level_values(1).to_numpy()]
        bounds = np.flatnonzero(np.r_[True, names_idx[1:] != names_idx[:-1], True])
        for a, b in zip(bounds[:-1], bounds[1:]):
            history.pooled[(col, str(name_of[col][names_idx[a]]))] = (list(keys_idx[a:b]), values[a:b])


def _job_series(history: History, jobs_all, n: int) -> None:
    """Each job's kernel time, step (where judged), cold compile, peak memory and accuracy a
    night, and what the records say of the machine a night."""
    import pandas as pd

    def series(col, where=None):
        rows = jobs_all if where is None else jobs_all[where]
        for key, part in rows.groupby("key", sort=False):
            v = np.full(n, np.nan)
            v[part["night"].to_numpy()] = pd.to_numeric(part[col], errors="coerce").to_numpy()
            yield key, v

    wanted = [("kernels", "device_ms", None)]
    if "gpu" in jobs_all:
        busy = pd.to_numeric(jobs_all.get("busy_pct"), errors="coerce").fillna(0) >= STEP_BUSY_PCT
        step_col = "steady_step_ms" if "steady_step_ms" in jobs_all else "compiled_step_ms"
        wanted.append(("step", step_col, busy & jobs_all["gpu"].notna()))
    if "compile_s" in jobs_all:
        cold = jobs_all.get("compile_state", pd.Series("cold", index=jobs_all.index)).fillna("cold") != "warm"
        wanted.append(("compile", "compile_s", cold))
    if "peak_memory_mb" in jobs_all:
        wanted.append(("memory", "peak_memory_mb", None))
    for level, col, where in wanted:
        for key, v in series(col, where):
            history.per_job[(level, key)] = v
    for col in ("sm_clock_mhz", "host_busy_cores", "slowed_rounds"):
        if col in jobs_all:
            by_night = pd.to_numeric(jobs_all[col], errors="coerce").groupby(jobs_all["night"]).median()
            history.machine[col] = by_night.reindex(range(n)).to_numpy(dtype=float)
    if "accuracy" in jobs_all:
        for key, part in jobs_all.groupby("key", sort=False):
            verdicts: list[str | None] = [None] * n
            for night, acc in zip(part["night"], part["accuracy"]):
                verdicts[int(night)] = acc if acc in ("passed", "failed") else None
            history.accuracy[key] = verdicts
