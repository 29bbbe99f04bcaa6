"""How often the nightly history's change points are false, as bench/change_detection.py
measured them on A/A histories, by the thresholds (changes.PENALTY, changes.FDR_Q) they were
measured at, with the size and the noise of those histories. Every answer of `history
changes` states the rate of its own thresholds (bench/results/nightly/change_detection.md,
with the command)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AARate:
    per_100_nights: float
    nights: int
    jobs: int
    noise: str


AA_RATES: dict[tuple[float, float], AARate] = {
    (3.0, 0.01): AARate(0.83, 30, 200, "real nights' noise (1-3% jitter, a neighbour's night in ten, kernels with "
                                       "two configs)"),
}
