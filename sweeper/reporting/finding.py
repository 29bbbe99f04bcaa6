"""One finding of the report's first screen, and the small readers of the jobs' tables that
the rules of sweeper/reporting/findings.py and its neighbours share."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass
class Finding:
    rule: str
    scope: str  # a job's label, or "across jobs"
    text: str
    link: str  # the anchor of the row or figure that shows it: "#job-0", "#fig-shares"
    figures: dict = field(default_factory=dict)  # the figures the sentence quotes


def short_name(name: str, width: int = 64) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def ms_text(x: float) -> str:
    return f"{x:.2f} ms" if x < 10 else f"{x:.1f} ms"


def ok_jobs(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs[jobs["status"] == "ok"]


def on_gpu(row) -> bool:
    return isinstance(row.get("gpu"), str) and bool(row.get("gpu"))


def number(x) -> float | None:
    return None if x is None or pd.isna(x) else float(x)


def by_job(table: pd.DataFrame) -> dict:
    """job -> its rows (one grouping, then a look-up a job: a sweep of 1,000 jobs would
    otherwise filter its whole kernels table 1,000 times)."""
    return {j: g for j, g in table.groupby("job", sort=False)}


def rows_of(groups: dict, job, like: pd.DataFrame) -> pd.DataFrame:
    return groups.get(job, like.iloc[0:0])
