"""Each autotune=on job's max-autotune decisions against their noise, as findings (pure:
the jobs and decisions tables in; sweeper/analysis/autotune_decisions.py made the rows)."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.autotune_decisions import NOISE_QUANTILE, REAL, WITHIN
from sweeper.reporting.finding import Finding
from sweeper.reporting.pairs import one_key_pairs


def _step_gains(jobs: pd.DataFrame) -> dict:
    """autotune=on job -> how much faster its step is than its autotune-off twin's (device
    ms), for the pairs of jobs that differ in autotune only (sweeper/reporting/pairs.py)."""
    return {p.b["job"]: float(p.a["device_ms"]) - float(p.b["device_ms"]) for p in one_key_pairs(jobs)
            if p.key == "autotune" and pd.notna(p.a["device_ms"]) and pd.notna(p.b["device_ms"])}


def decided(jobs: pd.DataFrame, decisions: pd.DataFrame) -> list[Finding]:
    """One finding an autotune=on job that tuned ops itself: how many of its choices were
    decided within noise, how many templates beat the library call beyond it, and what those
    bought, beside the step's gain over the job's autotune-off twin."""
    out: list[Finding] = []
    if decisions.empty:
        return out
    gains = _step_gains(jobs)
    for job, rows in decisions.groupby("job", sort=True):
        row = jobs[jobs["job"] == job]
        if row.empty:
            continue
        row = row.iloc[0]
        n = len(rows)
        noise = rows["noise_pct"].dropna()
        won = rows[rows["winner_kind"] == "template"]
        real = won[won["library_mark"] == REAL]
        gain = float(won["gain_ms"].fillna(0).sum())
        if noise.empty:
            judged = (f"none can be judged yet: no choice has been timed twice (the autotune store keeps a choice's "
                      f"earlier timings when a later job times it again, as after `python -m sweeper.store import` "
                      f"of another run's export)")
        else:
            within = int((rows["mark"] == WITHIN).sum())
            judged = (f"{within} of them beat their runner-up by less than the noise ({float(noise.median()):.0f}%, the "
                      f"{NOISE_QUANTILE * 100:.0f}th percentile of how far one choice's timings move between runs): "
                      f"those are a coin flip; templates won {len(won)}, {len(real)} beyond the noise of the library "
                      f"call, worth {float(real['gain_ms'].fillna(0).sum()):.3f} of the {gain:.3f} ms")
        step = gains.get(job)
        text = (f"{row['label']}: max-autotune decided {n} ops in this job's compile; {judged}"
                + ("" if not noise.empty else f"; templates won {len(won)}, {gain:.3f} ms faster than the library calls")
                + " (each op's call counted once)"
                + (f"; the step is {step:.2f} ms faster than autotune off" if step is not None and step >= 0
                   else f"; the step is {-step:.2f} ms slower than autotune off" if step is not None else "") + ".")
        out.append(Finding("autotune_decisions", str(row["label"]), text, f"#job-{job}",
                           {"decisions": n, "within_noise": int((rows["mark"] == WITHIN).sum()),
                            "templates_won": len(won), "templates_beyond_noise": len(real), "gain_ms": gain}))
    return out
