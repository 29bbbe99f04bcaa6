"""How often the nightly history's change points are false, as bench/change_detection.py
measured them on A/A histories, by the thresholds (changes.PENALTY, changes.FDR_Q) they were
measured at, with the size and the noise of those histories. Every answer of `history
changes` states the rate of its own thresholds (bench/results/nightly/change_detection.md,
with the command)."""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.analysis import changes as ch
from sweeper.words import count


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


AA_NOTE = "bench/results/nightly/change_detection.md"


def false_rate_line(jobs: int | None = None) -> str:
    """The A/A false-alarm rate of these thresholds, naming the size and the noise of the
    histories it was measured on (sweeper/reporting/change_rates.py), and this history's size
    where it differs."""
    rate = AA_RATES.get((ch.PENALTY, ch.FDR_Q))
    if rate is None:
        return "false-alarm rate at these thresholds: not measured (bench/change_detection.py)"
    here = f"; this history has {count(jobs, 'job')}" if jobs and jobs != rate.jobs else ""
    return (f"at these thresholds: {rate.per_100_nights:g} false flags per 100 nights on A/A histories of "
            f"{rate.nights} nights x {rate.jobs} jobs with {rate.noise} ({AA_NOTE}){here}")
