"""The microbenchmarks' GPU checks on a finished job (run on the GPU machine, same call as the job):
1. the costliest three kernels: sweeper's standalone ms against `python <kernel file>.py`
   (Inductor's own harness, a fresh process per kernel), criterion within 10%;
2. the speed target: breakdown plus microbenchmarks at most 25% of compile and warm-up,
   beside the manual chain's cost (the `-p` runs if bench/run_reference.py saved them,
   and the kernel runs timed here).

    python bench/microbench_check.py JOB_DIR [--kernels 3] > microbench_check.md

Outputs on the H200: bench/results/microbench/ (bash bench/gpu_run.sh microbench runs both).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.record import read_record  # noqa: E402
from sweeper.analysis.reference import harness_env  # noqa: E402

_MS = re.compile(r"^\s*([0-9.]+)ms\s+([0-9.]+)GB\s+([0-9.]+)GB/s", re.M)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("job_dir", type=Path)
    ap.add_argument("--kernels", type=int, default=3)
    args = ap.parse_args()
    rec = read_record(args.job_dir)
    table = rec.get("kernel_table") or {}
    rows = [r for r in table.get("rows") or [] if r.get("kernel_path")][: args.kernels]
    env = harness_env(rec, os.environ)
    print("| kernel | sweeper standalone ms | `python <kernel>.py` ms | diff % | within 10% | harness s |")
    print("|---|---|---|---|---|---|")
    manual_kernel_s = 0.0
    for r in rows:
        t0 = time.time()
        proc = subprocess.run([sys.executable, r["kernel_path"]], env=env, capture_output=True, text=True)
        took = time.time() - t0
        manual_kernel_s += took
        m = _MS.search(proc.stdout)
        theirs = float(m.group(1)) if m else None
        ours = r.get("standalone_ms")
        diff = (ours / theirs - 1) * 100 if ours and theirs else None
        ok = "yes" if diff is not None and abs(diff) <= 10 else "NO"
        print(f"| {r['name'][:70]} | {ours if ours is None else f'{ours:.4f}'} | "
              f"{theirs if theirs is None else f'{theirs:.4f}'} | {'' if diff is None else f'{diff:+.1f}'} | "
              f"{ok} | {took:.1f} |")
        if proc.returncode:
            print(f"\n`python {r['kernel_path']}` exited {proc.returncode}: {proc.stderr[-500:]}\n")
    phases = rec["timings"].get("phase_s") or {}
    base = phases.get("compile", 0) + phases.get("warmup", 0)
    added = sum(phases.get(p, 0) for p in ("time_modules", "profile_step", "profile_modules", "microbench_prepare", "microbench"))
    print(f"\nphase seconds: {', '.join(f'{k} {v:.1f}' for k, v in phases.items())}")
    print(f"compile + warm-up {base:.1f} s; breakdown + microbenchmarks {added:.1f} s = "
          f"{added / base * 100 if base else float('nan'):.0f}% (target at most 25%); "
          f"{len(table.get('rows') or [])} kernels, microbench phase {table.get('seconds')} s "
          f"(by pass: {table.get('pass_s')})")
    modules = [(m["label"], m.get("warmup_s"), m.get("seconds"), (m.get("wall_ms") or {}).get("n"))
               for m in rec.get("modules") or []]
    print(f"time_modules by module (label, warm-up s, seconds, rounds): {modules}; "
          f"garbage collections by phase: {rec['timings'].get('gc')}")
    refs = sorted((args.job_dir / "reference").glob("*_run0.txt"))
    ref_s = 0.0
    for f in refs:
        m = re.search(r"--- exit \d+, ([0-9.]+) s ---", f.read_text())
        ref_s += float(m.group(1)) if m else 0.0
    per_kernel = manual_kernel_s / len(rows) if rows else 0.0
    print(f"manual chain: compile + warm-up {base:.1f} s, `-p` per module once {ref_s:.1f} s "
          f"({len(refs)} modules), `python <kernel>.py` {per_kernel:.1f} s a kernel "
          f"(x {len(table.get('rows') or [])} selected = {per_kernel * len(table.get('rows') or []):.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
