"""A drift is not a step, and a short episode that comes back is not a change (pure; for
sweeper/analysis/changes.py).

- **Drift**: a series that moves a little every night (+0.3% a night over 30 nights) is cut
  by a step fit at many nights, each cut "a change". Before its cuts are tested, a series
  is held against a line: where Kendall's tau of its nights against their order is beyond
  DRIFT_P and a line fits it at least as well as the best single step (residual sums of
  squares), it is one drift, said once with its slope, and not cut.
- **Episode**: a series that steps one way and, within EPISODE_NIGHTS, back to where it was
  (its two changes of opposite sign, their sizes cancelling to within the larger of its noise
  and EPISODE_LEFT of the step) held a passing state (a host busy for a week), not a new
  level: its two changes are dropped and the episode said.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

DRIFT_P = 1e-4  # Kendall's tau p-value a drift needs
EPISODE_NIGHTS = 8  # nights between a step and the step back, at most
EPISODE_LEFT = 0.3  # of the step, what may be left after the step back


@dataclass
class Drift:
    slope: float  # log units a night (Theil-Sen)
    nights: int
    p: float

    @property
    def per_night_pct(self) -> float:
        return 100 * math.expm1(self.slope)

    @property
    def total_pct(self) -> float:
        return 100 * math.expm1(self.slope * (self.nights - 1))


def _step_rss(x: np.ndarray, min_size: int) -> float:
    best = float(np.sum((x - x.mean()) ** 2))
    for t in range(min_size, len(x) - min_size + 1):
        a, b = x[:t], x[t:]
        best = min(best, float(np.sum((a - a.mean()) ** 2) + np.sum((b - b.mean()) ** 2)))
    return best


def drift_of(y: np.ndarray, min_size: int = 3) -> Drift | None:
    """The drift of a log series (NaN nights left out), or None where it has none."""
    from scipy import stats

    ok = ~np.isnan(y)
    x, t = y[ok], np.flatnonzero(ok).astype(float)
    if len(x) < 2 * min_size + 2:
        return None
    tau = stats.kendalltau(t, x)
    if not np.isfinite(tau.pvalue) or tau.pvalue > DRIFT_P:
        return None
    fit = stats.theilslopes(x, t)
    line_rss = float(np.sum((x - (fit.intercept + fit.slope * t)) ** 2))
    if line_rss > _step_rss(x, min_size):
        return None  # a step explains it better
    return Drift(float(fit.slope), int(t[-1] - t[0] + 1), float(tau.pvalue))


def episodes(changes: list, noise_of_series) -> tuple[list, list]:
    """(changes that stand, episodes): each episode a (first, back) pair of one series'
    changes that went one way and came back within EPISODE_NIGHTS. `noise_of_series`
    gives a (level, name)'s noise in log units."""
    by_series: dict[tuple[str, str], list] = {}
    for c in changes:
        by_series.setdefault((c.level, c.name), []).append(c)
    dropped: set[int] = set()
    pairs: list[tuple] = []
    for key, cs in by_series.items():
        if key[0] in ("accuracy",) or len(cs) < 2:
            continue
        cs = sorted(cs, key=lambda c: c.night)
        for a, b in zip(cs, cs[1:]):
            if id(a) in dropped or b.night - a.night > EPISODE_NIGHTS or a.size_pct * b.size_pct >= 0:
                continue
            up, down = math.log1p(a.size_pct / 100), math.log1p(b.size_pct / 100)
            if abs(up + down) <= max(noise_of_series(key), EPISODE_LEFT * abs(up)):
                dropped.update((id(a), id(b)))
                pairs.append((a, b))
    return [c for c in changes if id(c) not in dropped], pairs
