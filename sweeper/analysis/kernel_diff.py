"""Two sweeps' kernels, one job against its match: each kernel's time old and new, its change,
and whether its source changed (a hash of its kernel file), the kernels under
KERNEL_MIN_SHARE_PCT of the step on both sides left out (pure: tables in, tables out)."""

from __future__ import annotations

import math
from pathlib import PurePath
from typing import Mapping

import numpy as np
import pandas as pd

from sweeper.analysis.regression import DEFAULT_THRESHOLD_PCT, KERNEL_MIN_SHARE_PCT


def source_hash(kernel_path: str | None) -> str | None:
    """Inductor names a kernel's file by a hash of its source: the file's stem."""
    return PurePath(kernel_path).stem if kernel_path else None


def kernel_diff(old: pd.DataFrame, new: pd.DataFrame, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                min_share_pct: float = KERNEL_MIN_SHARE_PCT, noise_pct: float | None = None) -> pd.DataFrame:
    """Kernels of one job's step in two sweeps (rows of tables.kernels_table, scope step),
    matched by name and, where both sides know it, source: which got slower or faster by
    at least the threshold and by more than the job's noise (`noise_pct`: what its own
    verdict was held against, the same rule), appeared, vanished or changed source. Kernels
    under `min_share_pct` of the step's device time on both sides are left out; largest
    absolute change first."""
    return kernel_diffs(old.assign(job=0), new.assign(job=1), {"job": (0, 1)}, threshold_pct, min_share_pct,
                        {"job": noise_pct})["job"]


_DIFF_COLUMNS = ["kernel", "category", "device_ms_old", "device_ms_new", "change_ms", "change_pct",
                 "share_pct_old", "share_pct_new", "change", "model_modules"]


def kernel_diffs(old: pd.DataFrame, new: pd.DataFrame, pairs: Mapping[str, tuple[int, int]],
                 threshold_pct: float = DEFAULT_THRESHOLD_PCT, min_share_pct: float = KERNEL_MIN_SHARE_PCT,
                 noise: Mapping[str, float | None] | None = None) -> dict[str, pd.DataFrame]:
    """kernel_diff for many jobs at once: key -> the diff of its old job's kernels (rows of
    `old` with that job number) against its new job's, `pairs` giving key -> (old job, new
    job) and `noise` key -> its noise. The same tables kernel_diff gives one by one, in one
    grouping and one merge: a compare of 1,000 jobs with every job's kernels spent 20 of its
    26 s in 1,000 small ones."""
    cols = ["kernel", "category", "device_ms", "share_pct", "source", "model_modules"]

    def side(t: pd.DataFrame, which: int) -> pd.DataFrame:
        t = t.reindex(columns=cols + ["scope", "job"])
        t = t[t["scope"] == "step"] if t["scope"].notna().any() else t
        key_of = {jobs[which]: key for key, jobs in pairs.items()}
        t = t.assign(pair=t["job"].map(key_of)).dropna(subset=["pair"])
        return t.groupby(["pair", "kernel"], as_index=False).agg(
            category=("category", "first"), device_ms=("device_ms", "sum"), share_pct=("share_pct", "sum"),
            source=("source", "first"), model_modules=("model_modules", "first"))

    m = side(old, 0).merge(side(new, 1), on=["pair", "kernel"], how="outer", suffixes=("_old", "_new"))
    m["category"] = m["category_new"].fillna(m["category_old"])
    m["model_modules"] = m["model_modules_new"].fillna(m["model_modules_old"])  # where in the model (older tables: none)
    m["change_pct"] = (m["device_ms_new"] / m["device_ms_old"] - 1) * 100
    m["change_ms"] = m["device_ms_new"].fillna(0) - m["device_ms_old"].fillna(0)
    limits = {k: max(threshold_pct, v) if v is not None and not math.isnan(v) else threshold_pct
              for k, v in ((k, (noise or {}).get(k)) for k in pairs)}
    limit = m["pair"].map(limits).astype(float)
    both_sources = m["source_old"].map(lambda x: isinstance(x, str)) & m["source_new"].map(lambda x: isinstance(x, str))
    m["change"] = np.select(
        [m["device_ms_old"].isna(), m["device_ms_new"].isna(), both_sources & (m["source_old"] != m["source_new"]),
         m["change_pct"].abs() >= limit],
        ["appeared", "vanished", "source changed", np.where(m["change_pct"] > 0, "slower", "faster")],
        default="") if len(m) else pd.Series(dtype=str)
    big = m[["share_pct_old", "share_pct_new"]].max(axis=1) >= min_share_pct
    kept = m[(m["change"] != "") & big]
    empty = kept.iloc[0:0][_DIFF_COLUMNS].reset_index(drop=True)  # with the columns' types, as kernel_diff's
    out = {key: empty.copy() for key in pairs}
    for key, group in kept.groupby("pair", sort=False):
        group = group.reset_index(drop=True)  # each job's rows in the order kernel_diff has them
        group = group.reindex(group["change_ms"].abs().sort_values(ascending=False).index)
        out[key] = group[_DIFF_COLUMNS].reset_index(drop=True)
    return out
