"""What got slower between two sweeps, beyond the noise (pure: tables in, verdicts out).

The test (docs/method.md, "Comparing sweeps"). Two figures of each job are compared: the
compiled step's wall time (its mean over the steady loop, the longest timing a job makes;
the median of its timed steps where a run has no loop) and its device time (summed kernel
time per step, from the profiled steps). A figure has changed when its change is at least
the threshold (5% by default) *and* larger than the noise of both measurements together:

    |change %| > noise_old % + noise_new %

A wall time's noise is the larger of its run's own (half the interquartile range of the
steady loop's stretches, each timed apart; in records without them, of the timed steps,
or the gap between their median and the loop if larger) and, when at least HISTORY_MIN earlier complete sweeps on
the same GPU model have the job, its history's (half the range of their values, % of
their median). A GPU job's device time does not follow the host (on the H200, three
identical runs moved it by at most 5.0% while their step times moved by up to 51%:
bench/results/nightly/), so its noise is its history's alone.

The verdict of a GPU job: slower or faster when the device time changed, or when the wall
time changed and so did the number of kernel launches per step, enough to account for it
(the same direction, at least half as much). A wall time that changed while the kernels'
time did not, and the launches not enough, is the host's doing: `host`, shown, not
flagged. A CPU job's device is the host: its wall time decides, unless its eager step
moved beyond the threshold and the noise too: the host's speed changed, `cannot judge`.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

DEFAULT_THRESHOLD_PCT = 5.0  # as the PyTorch benchmark dashboard flags a model's time
# A noise band wider than this (±%) hides every change a compare is for: a job whose change
# stays inside it is "cannot judge", not "within noise" or "unchanged" (on a busy 2-core CPU
# an identical re-run's step time went from 517 to 1567 ms against a noise of ±1010%).
CANNOT_JUDGE_NOISE_PCT = 50.0
CANNOT_JUDGE = "cannot judge"
HISTORY_MIN = 3  # earlier sweeps needed before their spread counts as noise
KERNEL_MIN_SHARE_PCT = 1.0  # kernels below this share of the step (both sides) are not listed


def step_noise_pct(timings: dict) -> float | None:
    """The compared step time's noise within one run, %: where the steady loop was timed
    in stretches (tasks/timing.steady_loop), half the interquartile range of the
    stretches' mean steps, % of the loop's mean; else (older records) the larger of half
    the timed steps' interquartile range and the gap between their median and the loop's
    step, % of the median."""
    loop = timings.get("steady_loop") or {}
    chunks = loop.get("chunk_step_ms") or []
    if len(chunks) >= 4 and loop.get("step_ms"):
        q25, q75 = np.percentile(chunks, [25, 75])
        return round(100 * (q75 - q25) / 2 / loop["step_ms"], 2)
    spread = timings.get("compiled_step_ms") or {}
    median, values = spread.get("median"), spread.get("values") or []
    if not median:
        return None
    parts = []
    if len(values) >= 4:
        q25, q75 = np.percentile(values, [25, 75])
        parts.append((q75 - q25) / 2)
    elif spread.get("iqr") is not None:
        parts.append(spread["iqr"] / 2)
    loop = (timings.get("steady_loop") or {}).get("step_ms")
    if loop:
        parts.append(abs(loop - median))
    return round(100 * max(parts) / median, 2) if parts else None


def wall_ms(row) -> float:
    """The wall time compared: the steady loop's step where the run has one."""
    loop = row.get("steady_step_ms")
    return loop if loop is not None and not pd.isna(loop) else row.get("compiled_step_ms")


def history_noise_pct(medians: list[float]) -> float | None:
    """Half the range of a job's step medians over earlier sweeps, % of their median."""
    values = [m for m in medians if m and not math.isnan(m)]
    if len(values) < HISTORY_MIN:
        return None
    return round(100 * (max(values) - min(values)) / 2 / float(np.median(values)), 2)


def change_verdict(change_pct: float, noise_pct: float | None, threshold_pct: float) -> str:
    """One figure's change: slower, faster, within noise, unchanged (under threshold), or
    cannot judge (its noise is wider than CANNOT_JUDGE_NOISE_PCT and the change inside it)."""
    if change_pct is None or math.isnan(change_pct):
        return ""
    if noise_pct is not None and too_noisy(noise_pct) and abs(change_pct) <= noise_pct:
        return CANNOT_JUDGE
    if abs(change_pct) < threshold_pct:
        return "unchanged"
    if noise_pct is not None and not math.isnan(noise_pct) and abs(change_pct) <= noise_pct:
        return "within noise"
    return "slower" if change_pct > 0 else "faster"


def too_noisy(noise_pct: float | None) -> bool:
    return noise_pct is not None and not math.isnan(noise_pct) and noise_pct > CANNOT_JUDGE_NOISE_PCT


def cannot_judge_why(noise_pct: float, what: str = "step time") -> str:
    return (f"its {what} varies by ±{noise_pct:.0f}% between and within the two runs (a host busy with other work): "
            f"a change inside that cannot be told from noise; re-run both on an idle machine")


FLAGGING = ("slower", "faster")
HOST = "host"  # the wall time moved, the kernels' time and launches did not


def launch_change_pct(r) -> float | None:
    """The change of kernel launches per step, %, where both runs counted them."""
    old, new = r.get("launches_old"), r.get("launches_new")
    if old is None or new is None or pd.isna(old) or pd.isna(new) or not old or abs(new - old) < 1:
        return None
    return (new / old - 1) * 100


def launches_account(r) -> bool:
    """Whether the launches' change can account for the step time's: the same direction and
    at least half as large, relatively. A launch-bound step's time follows its launches at
    most one for one, so 2079 -> 2081 launches (+0.1%) cannot explain a step 9% slower (an
    identical H200 run once was flagged so)."""
    launches, step = launch_change_pct(r), r["step_change_pct"]
    return launches is not None and launches * step > 0 and abs(launches) >= abs(step) / 2


def host_moved(r, threshold_pct: float) -> float | None:
    """A CPU job's eager step change, %, where it moved beyond the threshold and the noise:
    the host ran at another speed between the runs (on a 2-core CPU an identical re-run's
    eager step moved 2x), so no change of the compiled step can be told from it."""
    change = r.get("eager_change_pct")
    if change is None or pd.isna(change):
        return None
    return change if change_verdict(change, r.get("noise_pct"), threshold_pct) in FLAGGING else None


def _accuracy(value) -> str | None:
    """passed or failed from a jobs table's accuracy column ("not checked: ..." and empty:
    None)."""
    text = "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)
    return text if text in ("passed", "failed") else None


def accuracy_change(r) -> str | None:
    """"accuracy passed -> failed" (or back) where both runs checked the compiled step
    against eager and the verdicts differ; None otherwise."""
    old, new = _accuracy(r.get("accuracy_old")), _accuracy(r.get("accuracy_new"))
    return f"accuracy {old} -> {new}" if old and new and old != new else None


def verdict(r, threshold_pct: float) -> tuple[str, str]:
    """(verdict, why) for one row of compare_jobs (old and new both present). A step that
    no longer computes what eager does is a change of status: its times are of another
    computation, flagged before any timing."""
    if r["status_old"] != r["status_new"]:
        return f"status {r['status_old']} -> {r['status_new']}", "status"
    acc = accuracy_change(r)
    if acc:
        return acc, ("the compiled step no longer computes what eager does (tasks/accuracy.py)"
                     if acc.endswith("failed") else "the compiled step computes what eager does again")
    wall = change_verdict(r["step_change_pct"], r["noise_pct"], threshold_pct)
    if r.get("cpu"):  # the host is the device
        if wall == CANNOT_JUDGE:
            return wall, cannot_judge_why(r["noise_pct"])
        eager = host_moved(r, threshold_pct)
        if wall in FLAGGING and eager is not None:
            return CANNOT_JUDGE, (f"its eager step moved {eager:+.0f}% too (the host ran at another speed between "
                                  f"the runs): the compiled step's {r['step_change_pct']:+.1f}% cannot be told from "
                                  "the host's; re-run both on an idle machine")
        return wall, ("step time" if wall in FLAGGING else "")
    device = change_verdict(r["device_change_pct"], r["device_noise_pct"], threshold_pct)
    if device == CANNOT_JUDGE:
        return device, cannot_judge_why(r["device_noise_pct"], "kernel time")
    if device in FLAGGING:
        return device, "kernel time"
    if wall in FLAGGING and launches_account(r):
        return wall, "launches per step"
    if wall in FLAGGING:
        if pd.isna(r["device_change_pct"]):  # no profile to tell: the wall time decides
            return wall, "step time"
        launches = launch_change_pct(r)
        if launches is not None:
            return HOST, (f"step time moved; kernel time did not, and launches per step "
                          f"{r['launches_old']:.0f} -> {r['launches_new']:.0f} ({launches:+.1f}%) cannot account for it")
        return HOST, "step time moved; kernel time and launches did not"
    if wall == CANNOT_JUDGE:  # the kernels' time still tells, where there is one
        if device:
            return device, "kernel time (the step time varies too much to judge)"
        return wall, cannot_judge_why(r["noise_pct"])
    return wall, ""


def one_per_key(t: pd.DataFrame, cols: list[str], shares: list[str]) -> pd.DataFrame:
    """One row a job configuration (`key`) of one sweep, with `cols`: the jobs of one
    configuration (seed=0,1: its repeats) pooled, the median of those that finished ok,
    their spread counted in the noise, and the label says so (the first repeat alone stood
    for them, the others dropped without a word)."""
    t = t.reindex(columns=list(dict.fromkeys([*cols, "job", "steady_step_ms", "compiled_step_ms"])))
    t["step_ms"] = [wall_ms(r) for _, r in t.iterrows()]
    t = t.assign(_notok=t["status"] != "ok").sort_values(["_notok", "job"])
    first = t.drop_duplicates("key").set_index("key")
    ok = t[t["status"] == "ok"]
    numeric = [c for c in ("step_ms", "device_ms", "kernel_launches", "busy_pct", "eager_step_ms", *shares)]
    for key, reps in ok.groupby("key"):
        if len(reps) < 2:
            continue
        values = reps[numeric].apply(pd.to_numeric, errors="coerce")
        first.loc[key, numeric] = values.median()
        steps = values["step_ms"].dropna()
        spread = 100 * (steps.max() - steps.min()) / 2 / steps.median() if len(steps) > 1 else 0.0
        first.loc[key, "step_noise_pct"] = max(pd.to_numeric(reps["step_noise_pct"], errors="coerce").max(), spread)
        first.loc[key, "label"] = f"{first.loc[key, 'label']} (median of {len(reps)} repeats)"
    return first.reset_index()[cols]


def compare_jobs(old: pd.DataFrame, new: pd.DataFrame, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                 history: Mapping[str, float | None] | None = None,
                 device_history: Mapping[str, float | None] | None = None) -> pd.DataFrame:
    """One row per job configuration (`key`) of either sweep: step and device times, their
    changes, the noise each is held against, the verdict and why, and busy and category
    share changes beside them. `history`, `device_history`: key -> the job's history noise
    of each (history_noise_pct). Jobs in only one sweep are `new job` or `gone`."""
    shares = [c for c in new.columns if c.startswith("share_")]
    cols = ["key", "label", "status", "step_ms", "step_noise_pct", "device_ms", "kernel_launches", "busy_pct", "gpu",
            "eager_step_ms", "accuracy", *shares]

    m = one_per_key(old, cols, shares).merge(one_per_key(new, cols, shares), on="key", how="outer",
                                             suffixes=("_old", "_new"))
    m["label"] = m["label_new"].fillna(m["label_old"])
    m["step_change_pct"] = (m["step_ms_new"] / m["step_ms_old"] - 1) * 100
    hist = pd.Series({k: v for k, v in (history or {}).items() if v is not None}, dtype=float)
    m["history_noise_pct"] = m["key"].map(hist)
    run_old = m[["step_noise_pct_old", "history_noise_pct"]].max(axis=1)
    run_new = m[["step_noise_pct_new", "history_noise_pct"]].max(axis=1)
    m["noise_pct"] = (run_old.fillna(0) + run_new.fillna(0)).where(run_old.notna() | run_new.notna())
    m["device_change_pct"] = (m["device_ms_new"] / m["device_ms_old"] - 1) * 100
    m["eager_change_pct"] = (m["eager_step_ms_new"] / m["eager_step_ms_old"] - 1) * 100
    m["launches_old"], m["launches_new"] = m["kernel_launches_old"], m["kernel_launches_new"]
    hist_dev = pd.Series({k: v for k, v in (device_history or {}).items() if v is not None}, dtype=float)
    m["cpu"] = m["gpu_new"].isna() & m["gpu_old"].isna()  # a CPU job: its wall time alone decides
    m["device_noise_pct"] = (2 * m["key"].map(hist_dev)).where(~m["cpu"])
    m["busy_change_pp"] = m["busy_pct_new"] - m["busy_pct_old"]
    diffs = pd.DataFrame({c[len("share_"):]: m[c + "_new"] - m[c + "_old"] for c in shares}, index=m.index)
    moved = diffs.notna().any(axis=1) & (diffs.abs().max(axis=1) > 0)
    biggest = diffs.fillna(0).abs().idxmax(axis=1).where(moved) if len(shares) else pd.Series(None, index=m.index)
    m["largest_share_change"] = biggest
    m["largest_share_change_pp"] = [diffs.at[i, c] if isinstance(c, str) else float("nan") for i, c in biggest.items()]

    def one(r) -> tuple[str, str]:
        if pd.isna(r["status_old"]):
            return "new job", ""
        if pd.isna(r["status_new"]):
            return "gone", ""
        return verdict(r, threshold_pct)

    judged = [one(r) for _, r in m.iterrows()]
    m["verdict"] = [v for v, _ in judged]
    m["why"] = [w for _, w in judged]
    keep = ["key", "label", "status_old", "status_new", "accuracy_old", "accuracy_new", "gpu_old", "gpu_new", "step_ms_old",
            "step_ms_new", "step_change_pct", "step_noise_pct_old", "step_noise_pct_new",
            "history_noise_pct", "noise_pct", "device_ms_old", "device_ms_new", "device_change_pct",
            "device_noise_pct", "launches_old", "launches_new", "eager_change_pct", "verdict", "why", "busy_pct_old",
            "busy_pct_new",
            "busy_change_pp", "largest_share_change", "largest_share_change_pp"]
    return m[keep].sort_values("label").reset_index(drop=True)


def flagged(table: pd.DataFrame) -> pd.DataFrame:
    """Rows whose step time moved beyond threshold and noise, or whose status or accuracy
    verdict changed."""
    v = table["verdict"].fillna("")
    return table[v.isin(FLAGGING) | v.str.startswith("status ") | v.str.startswith("accuracy ")]


