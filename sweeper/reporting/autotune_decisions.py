"""Each autotune=on job's max-autotune decisions against their noise, as findings (pure:
the jobs and decisions tables in; sweeper/analysis/autotune_decisions.py made the rows)."""

from __future__ import annotations

import pandas as pd

from sweeper.analysis.autotune_decisions import NOISE_QUANTILE, REAL, WITHIN
from sweeper.analysis.autotune_verdict import TwinVerdict, twin_verdict
from sweeper.reporting.finding import Finding
from sweeper.reporting.pairs import one_key_pairs


def _verdicts(jobs: pd.DataFrame) -> dict:
    """autotune=on job -> the verdict on it against its autotune-off twin (sweeper/analysis/
    autotune_verdict.py), for the pairs of jobs that differ in autotune only; every repeat
    of the on setting gets the pair's one verdict."""
    out: dict[int, TwinVerdict] = {}
    for p in one_key_pairs(jobs):
        v = twin_verdict(*p.twins()) if p.key == "autotune" else None
        if v is not None and v.gpu is not None:
            out.update((job, v) for job in p.b_jobs)
    return out


def decided(jobs: pd.DataFrame, decisions: pd.DataFrame) -> list[Finding]:
    """One finding an autotune=on job with decisions (timed in its compile, or seeded from
    the store): how many of its choices were decided within noise, how many templates beat
    the library call beyond it, and what those bought, beside the verdict on its kernels'
    time against its autotune-off twin's."""
    out: list[Finding] = []
    if decisions.empty:
        return out
    verdicts = _verdicts(jobs)
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
        v = verdicts.get(job)
        stored = int((rows["timed"] == "store").sum()) if "timed" in rows else 0
        where = ("in this job's compile" if not stored else f"behind this job's choices, {stored} of them by an "
                 f"earlier job's timings from the autotune store")
        text = (f"{row['label']}: max-autotune decided {n} op{'s' if n != 1 else ''} {where}; {judged}"
                + ("" if not noise.empty else f"; templates won {len(won)}, {gain:.3f} ms faster than the library calls")
                + " (each op's call counted once)"
                + (f"; against autotune off, the kernels' time a step is {v.gpu.said()}" if v is not None else "")
                + ".")
        out.append(Finding("autotune_decisions", str(row["label"]), text, f"#job-{job}",
                           {"decisions": n, "within_noise": int((rows["mark"] == WITHIN).sum()),
                            "templates_won": len(won), "templates_beyond_noise": len(real), "gain_ms": gain}))
    return out
