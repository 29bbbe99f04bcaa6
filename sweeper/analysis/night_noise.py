"""Noise that real nights have beyond each kernel's own jitter, taken out of a nightly
history before its change points are tested (pure; sweeper/analysis/changes.py calls it).

- **A night of the machine**: a busy neighbour, a warm GPU or a slower host moves (nearly)
  every job of one night the same way. Such a night is found from the jobs' kernel time:
  each job against its own median, the median over the jobs a night (robust to a change in
  fewer than half of them), less the level a step fit gives that median (so a change that
  moves every job and stays, a new build's, is kept for the tests), a night standing out
  beyond MACHINE_Z robust widths and MACHINE_MIN, in the same direction in at least AGREE of
  the jobs. On such a night every kernel series (each job's, each family's and category's,
  a category's own shift for its kernels: a neighbour slows memory-bound kernels more) and,
  estimated apart, every step series is divided by the night's shift, and the night is said
  as the machine's.
- **A kernel with two configs**: Triton may pick another of a kernel's configs at its first
  launch (on the H100 the same batch-norm kernels ran 17-37% apart between identical runs,
  docs/findings.md). A job's family whose nights fall in two levels far apart (a gap of
  BIMODAL_GAP x the levels' own spread and BIMODAL_MIN) and that goes from one to the other
  and back (at least FLIPS switches: one switch that stays is a step, judged as a change) is
  judged in its own level: each night divided by its level's median, and the job's kernel
  time with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

MACHINE_Z = 5.0  # a machine night stands this many robust widths off the nights' level
MACHINE_MIN = 0.01  # and at least this much (log units, 1%)
AGREE = 0.8  # of the jobs, the share that moved its way on that night
MIN_JOBS = 4  # fewer jobs: no night is told the machine's
BIMODAL_GAP = 6.0  # the gap between a series' two levels, in their own spread
BIMODAL_MIN = 0.05  # and at least 5%
FLIPS = 2  # switches between the levels, at least
MIN_LEVEL_NIGHTS = 2  # nights in each level, at least


@dataclass
class MachineNight:
    """One night on which (nearly) every job moved together."""

    night: int
    size_pct: float  # the jobs' kernel time that night against their level, median, %
    agree: int  # jobs that moved its way
    jobs: int  # jobs that ran that night
    step_pct: float = float("nan")  # the same for the step time, where judged
    why: str = ""  # what the records say of the machine that night (clocks, host load), if anything


@dataclass
class Cleaned:
    machine: list[MachineNight] = field(default_factory=list)
    two_configs: dict[tuple[str, str], float] = field(default_factory=dict)  # (family, job) -> gap between levels
    episodes: list = field(default_factory=list)  # (step, step back) pairs of changes dropped (sweeper/analysis/drift.py)


AROUND = 3  # nights before and after a night that give the level it is held against


def _off_level(m: np.ndarray) -> np.ndarray:
    """Each night of a series against the nights around it: the smaller (in size) of its
    differences from the median of the AROUND nights before and of the AROUND nights after,
    and 0 where those differ in sign. A night between two levels is on one of them; a step
    that stays is on the level after it, so only a night off both (a neighbour's) stands out;
    the last night, with none after it, is held against those before."""
    n = len(m)
    out = np.zeros(n)
    for t in range(n):
        if np.isnan(m[t]):
            out[t] = np.nan
            continue
        sides = []
        for seg in (m[max(0, t - AROUND):t], m[t + 1:t + 1 + AROUND]):
            seg = seg[~np.isnan(seg)]
            if len(seg):
                sides.append(m[t] - float(np.median(seg)))
        if not sides or (len(sides) == 2 and sides[0] * sides[1] <= 0):
            continue
        out[t] = min(sides, key=abs)
    return out


def common_shift(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For a jobs x nights matrix of log values: each night's common shift off the nights
    around it (the jobs' median, each job against its own median), the share of jobs that
    moved its way against their own nights around it, and the nights' robust width of that
    shift."""
    d = y - np.nanmedian(y, axis=1, keepdims=True)
    with np.errstate(all="ignore"):
        m = np.nanmedian(d, axis=0)
    r = _off_level(m)
    own = np.vstack([_off_level(row) for row in d]) if len(d) else d
    with np.errstate(all="ignore"):
        agree = np.nanmean(np.sign(own) == np.sign(r)[None, :], axis=0)
    finite = r[np.isfinite(r)]
    width = 1.4826 * float(np.median(np.abs(finite - np.median(finite)))) if len(finite) else 0.0
    return r, agree, np.full(len(m), max(width, 1e-4))


def machine_nights(kernels: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The nights of a jobs x nights matrix of kernel time (ms) that are the machine's, and
    each night's shift (log units; 0 on the others)."""
    y = np.log(np.where(kernels > 0, kernels, np.nan))
    ran = np.sum(~np.isnan(y), axis=0)
    if y.shape[0] < MIN_JOBS:
        return [], np.zeros(y.shape[1])
    r, agree, width = common_shift(y)
    nights = [t for t in range(len(r)) if ran[t] >= MIN_JOBS and np.isfinite(r[t])
              and abs(r[t]) > max(MACHINE_Z * width[t], MACHINE_MIN) and agree[t] >= AGREE]
    shift = np.zeros(len(r))
    shift[nights] = r[nights]
    return nights, shift


def nights_shift(y: np.ndarray, nights: list[int]) -> np.ndarray:
    """The transient common shift of a jobs x nights log matrix on the given nights (0 elsewhere)."""
    shift = np.zeros(y.shape[1])
    if not nights or y.shape[0] == 0:
        return shift
    r, _, _ = common_shift(y)
    for t in nights:
        if np.isfinite(r[t]):
            shift[t] = r[t]
    return shift


def two_levels(y: np.ndarray) -> np.ndarray | None:
    """Each night's level (0 or 1) of a log series that has two configs, else None."""
    ok = ~np.isnan(y)
    x = y[ok]
    if len(x) < 2 * MIN_LEVEL_NIGHTS + 1:
        return None
    s = np.sort(x)
    gaps = np.diff(s)
    i = int(np.argmax(gaps))
    lo, hi = s[:i + 1], s[i + 1:]
    if len(lo) < MIN_LEVEL_NIGHTS or len(hi) < MIN_LEVEL_NIGHTS or gaps[i] < BIMODAL_MIN:
        return None
    spread = max(float(np.std(lo)), float(np.std(hi)), 1e-3)
    if gaps[i] < BIMODAL_GAP * spread:
        return None
    labels = np.full(len(y), -1)
    labels[ok] = (y[ok] > s[i]).astype(int)
    seq = labels[ok]
    if int(np.sum(seq[1:] != seq[:-1])) < FLIPS:
        return None
    return labels


def demode(y: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """A two-config series with each night divided by its level's median (log: less)."""
    out = y.copy()
    base = float(np.nanmedian(y[labels == 0]))
    for lab in (0, 1):
        sel = labels == lab
        if sel.any():
            out[sel] = y[sel] - (float(np.nanmedian(y[sel])) - base)
    return out


def explain(night: int, machine: dict[str, np.ndarray]) -> str:
    """What the jobs' records say of the machine on that night against the nights around it."""
    out = []
    clock = machine.get("sm_clock_mhz")
    if clock is not None and np.isfinite(clock[night]):
        around = np.nanmedian(np.delete(clock, night))
        if np.isfinite(around) and around > 0 and abs(clock[night] / around - 1) >= 0.03:
            out.append(f"the GPU's SM clock {clock[night]:.0f} MHz against {around:.0f} on the other nights")
    busy = machine.get("host_busy_cores")
    if busy is not None and np.isfinite(busy[night]):
        around = np.nanmedian(np.delete(busy, night))
        if np.isfinite(around) and busy[night] >= around + 2:
            out.append(f"{busy[night]:.0f} host cores busy with other work against {around:.0f}")
    slowed = machine.get("slowed_rounds")
    if slowed is not None and np.isfinite(slowed[night]) and slowed[night] > 0:
        out.append(f"the GPU slowed itself in {slowed[night]:.0f} stretches of the steady loops")
    return "; ".join(out)


def pct(x: float) -> float:
    return 100 * math.expm1(x)


def clean(history):
    """A copy of `history` (changes.History) with its two-config kernels judged in their own
    level and its machine nights divided out, and what was taken out."""
    import dataclasses

    got = Cleaned()
    pooled = {k: (jobs, m.astype(float).copy()) for k, (jobs, m) in history.pooled.items()}
    per_job = {k: v.astype(float).copy() for k, v in history.per_job.items()}
    cat_of = history.family_category
    for (level, fam), (jobs, m) in pooled.items():
        if level != "family":
            continue
        y = np.log(np.where(m > 0, m, np.nan))
        for i, job in enumerate(jobs):
            labels = two_levels(y[i])
            if labels is None:
                continue
            new = np.exp(demode(y[i], labels))
            delta = np.nan_to_num(new - m[i])
            got.two_configs[(fam, job)] = pct(float(np.nanmedian(y[i][labels == 1]) - np.nanmedian(y[i][labels == 0])))
            m[i] = new
            if ("kernels", job) in per_job:
                per_job[("kernels", job)] = per_job[("kernels", job)] + delta
            cat = pooled.get(("category", cat_of.get(fam, "")))
            if cat is not None and job in cat[0]:
                cat[1][cat[0].index(job)] += delta
    kernel_keys = [k for k in per_job if k[0] == "kernels"]
    if kernel_keys:
        kernels = np.vstack([per_job[k] for k in kernel_keys])
        nights, shift = machine_nights(kernels)
        if nights:
            for k in kernel_keys:
                per_job[k] = per_job[k] / np.exp(shift)
            cat_shift = {}
            for (level, name), (jobs, m) in pooled.items():
                if level == "category":
                    s = nights_shift(np.log(np.where(m > 0, m, np.nan)), nights)
                    cat_shift[name] = s
                    m /= np.exp(s)[None, :]
            for (level, name), (jobs, m) in pooled.items():
                if level == "family":
                    m /= np.exp(cat_shift.get(cat_of.get(name, ""), shift))[None, :]
            step_keys = [k for k in per_job if k[0] == "step"]
            step_shift = np.zeros(len(shift))
            if len(step_keys) >= MIN_JOBS:
                steps = np.vstack([per_job[k] for k in step_keys])
                step_shift = nights_shift(np.log(np.where(steps > 0, steps, np.nan)), nights)
                for k in step_keys:
                    per_job[k] = per_job[k] / np.exp(step_shift)
            y = np.log(np.where(kernels > 0, kernels, np.nan))
            _, agree, _ = common_shift(y)
            for t in nights:
                ran = int(np.sum(~np.isnan(y[:, t])))
                got.machine.append(MachineNight(t, pct(shift[t]), int(round(agree[t] * ran)), ran,
                                                pct(step_shift[t]) if step_shift[t] else float("nan"),
                                                explain(t, history.machine)))
    return dataclasses.replace(history, pooled=pooled, per_job=per_job), got
