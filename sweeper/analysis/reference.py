"""Compare sweeper's module breakdowns with PyTorch's own `python <module>.py -p` (pure).

The `-p` harness (torch/_inductor/wrapper_benchmark.py) ends with a line
    Output for tabulate: NAME, 20.73%, 9.30%, 1.13%, 0.00%, 33.79%, 64.95%, 22.448ms
whose columns are pointwise, reduction, persistent reduction, triton-unknown and unknown
(non-Triton) device time, each as a percentage of the unprofiled wall time, then the busy
percentage (their sum) and the wall time. A category's share of *device* time is its
percentage over the busy percentage; that share does not depend on the noisy wall time,
which is why it is the figure compared.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from sweeper.analysis.categories import REFERENCE_CATEGORIES
from sweeper.record import cache_env

_TABULATE_RE = re.compile(r"^Output for tabulate:\s*(.*)$", re.M)
# bench/run_reference.py appends this to a run's saved output: the host's launch speed
# (tasks/timing.launch_probe_us) read right after the run, microseconds per launch.
LAUNCH_PROBE_LINE = "--- launch probe after the run: {:.3f} us ---"
_PROBE_RE = re.compile(r"^--- launch probe after the run: ([0-9.]+) us ---$", re.M)


@dataclass
class ReferenceRun:
    pct_of_wall: dict[str, float]  # category -> % of wall time
    busy_pct: float
    wall_ms: float
    launch_us: float | None = None  # None in outputs saved before the probe existed

    @property
    def share_of_device_pct(self) -> dict[str, float]:
        total = sum(self.pct_of_wall.values())
        return {k: (v / total * 100 if total else 0.0) for k, v in self.pct_of_wall.items()}


def parse_tabulate(output: str) -> ReferenceRun:
    """The last 'Output for tabulate:' line of a `-p` run's output, and the launch probe
    that bench/run_reference.py appended to it, if any."""
    lines = _TABULATE_RE.findall(output)
    if not lines:
        raise ValueError("no 'Output for tabulate:' line: the -p run did not finish")
    fields = [f.strip() for f in lines[-1].split(",")]
    values = fields[-(len(REFERENCE_CATEGORIES) + 2):]
    if len(values) != len(REFERENCE_CATEGORIES) + 2 or not values[-1].endswith("ms"):
        raise ValueError(f"unexpected tabulate line: {lines[-1]!r}")
    pcts = [float(v.rstrip("%")) for v in values[:-1]]
    return ReferenceRun(
        pct_of_wall=dict(zip(REFERENCE_CATEGORIES, pcts[:-1])),
        busy_pct=pcts[-1],
        wall_ms=float(values[-1][:-2]),
        launch_us=float(probe[-1]) if (probe := _PROBE_RE.findall(output)) else None,
    )


def compare(breakdown: dict, runs: list[ReferenceRun], share_tol_pp: float = 1.5, busy_tol_pp: float = 2.0) -> dict:
    """Category shares of device time (each within share_tol_pp of the reference's median)
    and the reference-style busy percentage (within the range of the reference's runs, or
    within busy_tol_pp of their median)."""
    if not runs:
        raise ValueError("no reference runs to compare with")
    ours = breakdown["reference_categories_share_pct"]
    shares = {}
    for cat in REFERENCE_CATEGORIES:
        ref = statistics.median(r.share_of_device_pct[cat] for r in runs)
        diff = ours.get(cat, 0.0) - ref
        shares[cat] = {"sweeper": ours.get(cat, 0.0), "reference": ref, "diff_pp": diff,
                       "ok": abs(diff) <= share_tol_pp}
    ref_busy = [r.busy_pct for r in runs]
    busy = breakdown["busy_pct_reference_style"]
    busy_median = statistics.median(ref_busy)
    busy_ok = min(ref_busy) <= busy <= max(ref_busy) or abs(busy - busy_median) <= busy_tol_pp
    ref_wall = [r.wall_ms for r in runs]
    return {
        "shares": shares,
        "busy": {"sweeper": busy, "reference_runs": ref_busy, "reference_median": busy_median,
                 "ok": busy_ok},
        "reference_wall_ms": ref_wall,
        "reference_wall_range_pct": (max(ref_wall) - min(ref_wall)) / statistics.median(ref_wall) * 100,
        "ok": busy_ok and all(s["ok"] for s in shares.values()),
    }


def harness_env(record: dict, base: dict, tmpdir: str | None = None) -> dict:
    """Environment for running a job's module or kernel files by hand (`python <file>.py`):
    the job's own Inductor and Triton caches, so that kernels load instead of compiling,
    and optionally a private TMPDIR (the `-p` harness writes its trace to a fixed path
    there). The cache is `artifacts.cache` (under `cache_root` when set), else the job
    folder's `cache`."""
    cache = Path((record.get("artifacts") or {}).get("cache") or Path(record["job"]["dir"]) / "cache")
    env = dict(base, **cache_env(cache))
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    return env
