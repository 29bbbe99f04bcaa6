"""Why does PyTorch's harness time a launch-bound module slower than sweeper does?
(densenet121's backward read 13.8 ms a call in the job against 15.1 to 24.1 ms under
`python <module>.py -p` on an idle H200, with the same kernel time.)

Runs `python <module>.py` (the harness's timing only, no profile: 20 s instead of 65 s a
run) several times with Inductor's default compile worker pool and with none
(TORCHINDUCTOR_COMPILE_THREADS=1). If the pool's start-up (up to 32 workers importing
torch) overlaps the harness's timing, the second set is faster and steadier.

    python bench/harness_wall.py JOB_DIR [--runs 3] [--module backward_1] > harness_wall.md
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.record import read_record  # noqa: E402
from sweeper.analysis.reference import harness_env  # noqa: E402

_TOOK = re.compile(r"^(\d+\.\d+)$", re.M)  # print_performance: seconds per call, 6 decimals


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("job_dir", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--module", default=None, help="module label (default: every module)")
    args = ap.parse_args()
    rec = read_record(args.job_dir)
    print("| module | sweeper wall ms (median, in-run range %) | harness, default pool: ms per call | "
          "harness, TORCHINDUCTOR_COMPILE_THREADS=1: ms per call |")
    print("|---|---|---|---|")
    for m in rec["modules"]:
        if args.module and m["label"] != args.module or not m.get("wall_ms"):
            continue
        cells = []
        for threads in (None, "1"):
            values = []
            for _ in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    env = harness_env(rec, os.environ, tmp)
                    if threads:
                        env["TORCHINDUCTOR_COMPILE_THREADS"] = threads
                    t0 = time.time()
                    proc = subprocess.run([sys.executable, m["source_path"]], env=env, capture_output=True, text=True)
                found = _TOOK.findall(proc.stdout)
                values.append(float(found[0]) * 1000 if found else float("nan"))
                print(f"<!-- {m['label']} threads={threads or 'default'}: {values[-1]:.3f} ms, run {time.time() - t0:.1f} s, "
                      f"exit {proc.returncode} -->", flush=True)
            cells.append(", ".join(f"{v:.2f}" for v in values) + f" (median {statistics.median(values):.2f})")
        w = m["wall_ms"]
        print(f"| {m['label']} | {w['median']:.2f} ({w.get('range_pct', 0):.1f}%) | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
