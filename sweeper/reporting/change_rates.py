"""How often the nightly history's change points are false, as bench/change_detection.py
measured them on A/A histories (30 nights x 200 jobs, noise from real repeated H200 nights):
false flags per 100 nights, by the thresholds (changes.PENALTY, changes.FDR_Q) they were
measured at. Every answer of `history changes` states the rate of its own thresholds
(bench/results/nightly/change_detection.md, with the command)."""

AA_FALSE_FLAGS: dict[tuple[float, float], float] = {(3.0, 0.01): 0.25}
