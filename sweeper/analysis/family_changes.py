"""A kernel family's (or category's) change over the jobs that run it (pure): the jobs'
night-to-night series in noise widths, cut where their mean or a scan of the jobs steps,
tested job by job and combined (Fisher's method), the jobs it moved told by a two-group
mixture of their shifts, its size where it happened and its interval (the method:
sweeper/analysis/changes.py)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from sweeper.analysis.change_points import (BASELINE, CLIP, MIN_JOBS, MIN_TOUCHED, PENALTY, PERSIST, TEST_NIGHTS,
                                            Candidate, cuts, noise_of, windows)
from sweeper.analysis.drift import drift_of

BOOTSTRAP = 200  # resamples of the jobs for the interval of a family's change

MIN_VAR = 0.25  # a window's variance at least this (noise widths squared): nights clipped alike are not exact
MOVED_P = 0.00135  # a job moved when its one-sided p is under this (3 sd of a normal)
POOLED_ONLY_P = 1e-8  # a family's change with fewer than MIN_TOUCHED jobs moved alone: its combined p at most this
SCAN_Z = 3.0  # a job steps at a night when its nights after differ from those before by this many noise widths
SCAN_CLIP = 4.0  # a night counts at most this many noise widths in the scan: one preempted night makes no step


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
        if any(c.night == refined and c.size * got[3] > 0 for c in out):
            continue  # both locators found it
        found_here = _candidate(level, name, refined, got, jobs, positions, how)
        if found_here is not None:
            out.append(found_here)
    return out


def _candidate(level: str, name: str, t: int, got: tuple, jobs: Sequence[str], positions: int,
               how: str) -> Candidate | None:
    """The family's candidate at night `t` from its jobs' windows there (`_at`'s answer):
    Fisher's combination of the jobs' one-sided p-values, the jobs it moved, its size where
    it happened (the mixture), the shift over all the jobs (random effects) in the evidence;
    None where the mixture does not let it stand (_moved_fit)."""
    from scipy import stats

    r, v, one_sided, sign, use, _ = got
    p_fisher = float(stats.combine_pvalues(np.clip(one_sided, 1e-300, 1.0), method="fisher").pvalue)
    mu, se, tau2 = _dersimonian_laird(r, v)
    used = [j for j, u in zip(jobs, use) if u]
    moved = one_sided < MOVED_P
    touched = tuple(j for j, m in zip(used, moved) if m)
    p = min(1.0, p_fisher * positions)
    fit = _moved_fit(r, v, sign, moved, p)
    if fit is None:
        return None
    start, size, share = fit
    return Candidate(level, name, t, size, (size, size), p, _named(used, r, v, size, share, touched), int(use.sum()),
                     f"{how} at this night; Fisher's combination of the "
                     f"{int(use.sum())} jobs' shifts p={p_fisher:.2g} (x{positions} cut positions); "
                     f"{len(touched)} jobs moved (Welch p < {MOVED_P:g} each); the change where it happened from "
                     f"a two-group mixture (about {100 * share:.0f}% of the jobs moved); shift over all the jobs "
                     f"{100 * math.expm1(mu):+.2f}% (random effects, 95% CI {100 * math.expm1(mu - 1.96 * se):+.2f} "
                     f"to {100 * math.expm1(mu + 1.96 * se):+.2f}%, between-job sd {100 * math.sqrt(tau2):.2f}%)",
                     extra={"shifts": (r, v, start), "significant": len(touched)})


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
    pre, post = windows(t, found, n)
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
        pre, post = windows(c, others, len(z))
        a, b = z[pre][~np.isnan(z[pre])], z[post][~np.isnan(z[post])]
        if len(a) < BASELINE or len(b) < PERSIST:
            continue
        s = abs(float(b.mean() - a.mean())) * math.sqrt(len(a) * len(b) / (len(a) + len(b)))
        if s > score:
            best, score = c, s
    return best
