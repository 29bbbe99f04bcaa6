"""The finished jobs of a stopped sweep against the same jobs of an earlier sweep: the
kernel-level compare of `python -m sweeper.history compare --kernels`, which compares
complete sweeps only (its noise history counts complete ones), for a run that a sitting's
end cut short. Jobs that did not finish on either side are left out, not compared.

    python bench/compare_finished.py NEW_SWEEP OLD_SWEEP
e.g. the headline's second run, stopped after its first job (bench/results/headline/):
    python bench/compare_finished.py <run2_sweep_folder.tgz unpacked>/run2 <sweep_folder.tgz unpacked>/headline
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper import history  # noqa: E402
from sweeper.analysis import regression as rg  # noqa: E402
from sweeper.reporting import sweeps as sw  # noqa: E402


def main(new: Path, old: Path) -> int:
    t_new, t_old = sw.sweep_tables(new), sw.sweep_tables(old)
    ok_new, ok_old = (set(t.jobs.loc[t.jobs["status"] == "ok", "key"]) for t in (t_new, t_old))
    both = ok_new & ok_old
    if not both:
        print(f"no job finished in both {new} and {old}", file=sys.stderr)
        return 2
    t_new = sw.SweepTables(t_new.path, t_new.jobs[t_new.jobs["key"].isin(both)], t_new.kernels, t_new.started_at)
    t_old = sw.SweepTables(t_old.path, t_old.jobs[t_old.jobs["key"].isin(both)], t_old.kernels, t_old.started_at)
    table = rg.compare_jobs(t_old.jobs, t_new.jobs)  # no history: each job's noise is its two runs' own
    cmp = sw.Comparison(t_old, t_new, rg.DEFAULT_THRESHOLD_PCT, table, 0)
    cmp.details = {r["key"]: sw.job_detail(t_old, t_new, r["key"], rg.DEFAULT_THRESHOLD_PCT, sw.kernel_noise(r))
                   for _, r in table.iterrows()}
    print(f"{len(both)} job(s) finished in both; the others are left out\n")
    print(history.compare_text(cmp))
    return 1 if len(rg.flagged(table)) else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
