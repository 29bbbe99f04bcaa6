"""Where a max-autotune compile's template autotuning went, op kind by op kind, from
Inductor's own lines in a job's log (job.log, or the part of it a run left):

    AUTOTUNE convolution(128x32x112x112, 32x1x3x3)
    SingleProcess AUTOTUNE benchmarking takes 9.48 seconds and 0.0006 seconds precompiling for 21 choices

and the choice summary Inductor prints before them ({"num_choices": ..., "best_kernel": ...}).
Grouped convolutions (GROUPS > 1 in the Triton template's description: depthwise ones)
are counted apart. For each kind: ops, seconds, choices an op, how often a Triton template
won. Reads a log, plain or .gz:

    python bench/autotune_ops.py bench/results/headline/mixnet_l_autotune_lines.log.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

_TIMING = re.compile(r"benchmarking takes ([\d.]+) seconds and ([\d.]+) seconds precompiling for (\d+) choices")


def read_lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return f.read().splitlines()


def autotuned_ops(lines: list[str]) -> list[dict]:
    """One dict an autotuned op: its choice summary, op name and signature, seconds, choices."""
    ops, current = [], {}
    for line in lines:
        if line.startswith("{") and "num_choices" in line:
            current = json.loads(line)
        elif line.startswith("AUTOTUNE "):
            current["sig"] = line[len("AUTOTUNE "):]
            current["op"] = current["sig"].split("(")[0]
        elif (m := _TIMING.search(line)):
            current.update(seconds=float(m[1]), precompiling_s=float(m[2]), choices=int(m[3]))
            ops.append(current)
            current = {}
    return ops


def kind(op: dict) -> str:
    desc = op.get("best_triton_kernel_desc") or op.get("best_kernel_desc") or ""
    grouped = op.get("op") == "convolution" and "GROUPS=" in desc and "GROUPS=1," not in desc
    return f"{op.get('op', '?')}{' (grouped)' if grouped else ''}"


def summary(ops: list[dict]) -> list[str]:
    by: dict[str, list[dict]] = defaultdict(list)
    for op in ops:
        by[kind(op)].append(op)
    total = sum(o["seconds"] for o in ops)
    out = ["| op | ops | seconds | share % | s an op | choices an op | a Triton template won |", "|---|---|---|---|---|---|---|"]
    for name, group in sorted(by.items(), key=lambda kv: -sum(o["seconds"] for o in kv[1])):
        s = sum(o["seconds"] for o in group)
        won = sum(1 for o in group if str(o.get("best_kernel", "")).startswith("triton"))
        out.append(f"| {name} | {len(group)} | {s:.1f} | {100 * s / total:.0f} | {s / len(group):.1f} "
                   f"| {sum(o['choices'] for o in group) / len(group):.1f} | {won} of {len(group)} |")
    out.append(f"\n{len(ops)} ops, {total:.1f} s benchmarking, {sum(o['precompiling_s'] for o in ops):.1f} s "
               "precompiling reported apart")
    slowest = sorted(ops, key=lambda o: -o["seconds"])[:5]
    out.append("\nslowest ops: " + "; ".join(
        f"{o['sig']} {o['seconds']:.1f} s, {o['choices']} choices, chose {o.get('best_kernel')}"
        + (f" ({o['best_time']:.3f} ms; best Triton template {o['best_triton_time']:.3f} ms)"
           if o.get("best_triton_time") else "") for o in slowest))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path)
    ops = autotuned_ops(read_lines(ap.parse_args().log))
    if not ops:
        print("no AUTOTUNE timing lines in this log (max-autotune off, or every choice came from a store)")
        return 1
    print("\n".join(summary(ops)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
