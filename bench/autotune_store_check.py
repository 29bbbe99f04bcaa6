"""The node's autotune store (config key autotune_store), measured: the compile time of each
job of a sweep whose jobs share shapes, in the order they ran, the first paying for the
autotuning and the next reusing it. On the GPU machine:

    python -m sweeper model=resnet18 mode=inference batch_size=32 autotune=on cudagraphs=off,on \\
        autotune_store=/tmp/store hydra.sweep.dir=/tmp/store_sweep
    python bench/autotune_store_check.py /tmp/store_sweep > autotune_store.md
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.record import read_record  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep_dir", type=Path)
    args = ap.parse_args()
    recs = []
    for d in sorted(p for p in args.sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()):
        try:
            recs.append(read_record(d))
        except Exception as e:  # noqa: BLE001 - a job without a record is listed, not fatal
            print(f"job {d.name}: no record ({e})")
    recs.sort(key=lambda r: r["job"].get("started_at") or "")
    print("| job (in the order they started) | status | compile s | template autotuning s | template precompiling s "
          "| kernel autotuning s | rest s | choices from the store | new in the store |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        t = r.get("timings") or {}
        split = t.get("compile_split_s") or {}
        store = t.get("autotune_store") or {}
        print(f"| {' '.join(r['job'].get('overrides', []))} | {r['status']} | {t.get('compile_s')} "
              f"| {split.get('template_autotuning_s')} | {split.get('template_precompiling_s')} "
              f"| {split.get('kernel_autotuning_s')} | {split.get('rest_s')} "
              f"| {store.get('seeded_entries')} | {store.get('new_in_store')} |")
    ok = [r for r in recs if r["status"] == "ok"]
    if len(ok) >= 2:
        first, later = ok[0]["timings"]["compile_s"], ok[1]["timings"]["compile_s"]
        print(f"\nsecond job's compile against the first's: {later:.1f} s / {first:.1f} s = {later / first:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
