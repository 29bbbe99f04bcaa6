"""The verdict of a confirmation (pure): the old and the new job's rounds, taken in turn on
one machine (`python -m sweeper.history confirm`), compared.

Each round's figure is the median of its calls. The shift is the ratio of the new rounds'
median to the old's, with a 95% interval by resampling the rounds (scipy.stats.bootstrap,
the percentile method: a ratio of medians has no closed form); Mann-Whitney's U test
(scipy) says whether the rounds of one side run longer than the other's, and Cliff's delta
(from U: the share of pairs new > old less the share new < old, -1 to 1) how much they
overlap. Confirmed when p < ALPHA, the interval excludes no change, and the shift is at
least MIN_SHIFT; else not confirmed (the flag was noise, or too small for these rounds).
Why rounds in turn: two runs of identical systems taken one after the other can differ by
tens of percent (Abedi and Brecht, ICPE 2017); in turn, a drift of the machine hits both.
Why several processes a side: a process keeps its own luck (where its memory landed, its
threads' cores) for as long as it lives; one process a side, the same job against itself
read "confirmed slower +7.4%, p=0.0004" on a 2-core CPU. With two or more a side, the
spread between one side's own processes is measured, and a shift within it is not
confirmed."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

ALPHA = 0.01
MIN_SHIFT = 0.01  # a confirmed change is at least 1%
MIN_ROUNDS = 5  # fewer rounds a side cannot give p < ALPHA (Mann-Whitney's least p with 5 and 5 is 0.008)


@dataclass
class Confirmed:
    verdict: str  # "slower" | "faster" | "not confirmed"
    shift_pct: float  # new against old, %
    ci_pct: tuple[float, float]
    p_value: float
    cliffs_delta: float
    old_ms: float  # median round
    new_ms: float
    rounds: tuple[int, int]
    process_spread_pct: float | None = None  # the largest gap between one side's own processes, %

    def words(self) -> str:
        what = f"confirmed {self.verdict}" if self.verdict != "not confirmed" else "not confirmed"
        spread = (f"; one side's own processes {self.process_spread_pct:.1f}% apart"
                  if self.process_spread_pct is not None else "")
        return (f"{what}: {self.shift_pct:+.1f}% (95% CI {self.ci_pct[0]:+.1f} to {self.ci_pct[1]:+.1f}%), "
                f"{self.old_ms:.3f} -> {self.new_ms:.3f} ms a step, Mann-Whitney p={self.p_value:.2g}, "
                f"Cliff's delta {self.cliffs_delta:+.2f}, {self.rounds[0]} and {self.rounds[1]} rounds in turn{spread}")


def cliffs_delta(u_new: float, n_old: int, n_new: int) -> float:
    """Cliff's delta of new against old from Mann-Whitney's U of the new sample (ties half)."""
    return 2 * u_new / (n_old * n_new) - 1


def process_spread(by_process: list[list[float]]) -> float | None:
    """The gap between the medians of one side's processes, relative (None for one)."""
    medians = [statistics.median(r) for r in by_process if r]
    return max(medians) / min(medians) - 1 if len(medians) > 1 else None


def confirm(old_rounds: list[float], new_rounds: list[float], seed: int = 0,
            old_by_process: list[list[float]] | None = None,
            new_by_process: list[list[float]] | None = None) -> Confirmed:
    """The verdict of rounds (each round's median call, ms), old and new; with the rounds of
    each side's processes apart, a shift within their spread is not confirmed."""
    import numpy as np
    from scipy import stats

    if min(len(old_rounds), len(new_rounds)) < MIN_ROUNDS:
        raise ValueError(f"{len(old_rounds)} and {len(new_rounds)} rounds: at least {MIN_ROUNDS} a side are needed "
                         f"for a p-value under {ALPHA} (--rounds)")
    old, new = np.asarray(old_rounds, float), np.asarray(new_rounds, float)
    test = stats.mannwhitneyu(new, old, alternative="two-sided")
    delta = cliffs_delta(float(test.statistic), len(old), len(new))
    ratio = float(np.median(new) / np.median(old))

    def log_ratio(a, b, axis=-1):
        return np.log(np.median(b, axis=axis) / np.median(a, axis=axis))

    boot = stats.bootstrap((old, new), log_ratio, n_resamples=2000, method="percentile",
                           random_state=np.random.default_rng(seed), vectorized=True)
    lo, hi = math.expm1(boot.confidence_interval.low), math.expm1(boot.confidence_interval.high)
    shift = ratio - 1
    spreads = [x for x in (process_spread(old_by_process or []), process_spread(new_by_process or []))
               if x is not None]
    spread = max(spreads) if spreads else None
    verdict = "not confirmed"
    if test.pvalue < ALPHA and abs(shift) >= max(MIN_SHIFT, spread or 0.0) and (lo > 0 or hi < 0):
        verdict = "slower" if shift > 0 else "faster"
    return Confirmed(verdict, 100 * shift, (100 * min(lo, shift), 100 * max(hi, shift)), float(test.pvalue), delta,
                     statistics.median(old_rounds), statistics.median(new_rounds), (len(old), len(new)),
                     100 * spread if spread is not None else None)
