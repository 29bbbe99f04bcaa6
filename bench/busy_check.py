"""The busy figure against its second instrument, per job of one or more sweep folders:
busy_pct (kernel intervals per step over the unprofiled step time) beside NVML's
utilization over the unprofiled step in a loop, their difference, and that difference as
microseconds per kernel launch (what NVML would have to count per launch to explain it).

    python bench/busy_check.py SWEEP_DIR [SWEEP_DIR ...] > bench/results/busy/jobs.md

Criterion (docs/method.md): the two within 7 points on every job.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.reporting.load import load_sweep  # noqa: E402
from sweeper.reporting.notes import BUSY_NVML_GAP_PP  # noqa: E402
from sweeper.reporting.tables import record_label  # noqa: E402


def _f(x, fmt="{:.1f}") -> str:
    return "–" if x is None else fmt.format(x)


def rows(sweep_dirs: list[Path]) -> list[dict]:
    out = []
    for sweep in sweep_dirs:
        _, records, notes = load_sweep(sweep)
        for note in notes:
            print(f"<!-- {note} -->")
        for num, rec in sorted(records.items()):
            step, t = rec.get("step") or {}, rec.get("timings") or {}
            nvml = t.get("nvml") or {}
            # the time busy_pct divides by: the steady loop's step (the timed steps' median
            # in records made before the loop existed)
            step_ms = step.get("busy_wall_ms") or (t.get("compiled_step_ms") or {}).get("median")
            row = {"sweep": sweep.name, "job": num, "label": record_label(rec), "status": rec["status"],
                   "step_ms": step_ms, "launches": step.get("kernel_launches"), "busy": step.get("busy_pct"),
                   "capped": step.get("busy_capped"), "nvml": nvml.get("util_pct"),
                   "samples": nvml.get("samples"), "period_ms": nvml.get("period_ms"),
                   "ref_style": step.get("busy_pct_reference_style"), "span": step.get("busy_pct_profiled_span"),
                   "reason": nvml.get("reason")}
            row["diff"] = row["nvml"] - row["busy"] if None not in (row["nvml"], row["busy"]) else None
            row["us_per_launch"] = (row["diff"] / 100 * step_ms * 1000 / row["launches"]
                                    if row["diff"] is not None and step_ms and row["launches"] else None)
            out.append(row)
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 2
    table = rows([Path(a) for a in argv])
    print("| job | step ms (loop) | kernels / step | busy % | NVML % | NVML − busy | µs per launch "
          "| NVML samples (period ms) | as -p % | profiled span % |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        if r["status"] != "ok":
            print(f"| {r['label']} ({r['sweep']} #{r['job']}) | {r['status']} | | | | | | | | |")
            continue
        print(f"| {r['label']} | {_f(r['step_ms'], '{:.2f}')} | {_f(r['launches'], '{:.0f}')} "
              f"| {_f(r['busy'])}{' (capped)' if r['capped'] else ''} | {_f(r['nvml'])} | {_f(r['diff'], '{:+.1f}')} "
              f"| {_f(r['us_per_launch'], '{:+.2f}')} | {_f(r['samples'], '{}')} ({_f(r['period_ms'], '{}')}) "
              f"| {_f(r['ref_style'])} | {_f(r['span'])} |")
    ok = [r for r in table if r["status"] == "ok"]
    within = [r for r in ok if r["diff"] is not None and abs(r["diff"]) <= BUSY_NVML_GAP_PP]
    print(f"\n{len(within)} of {len(ok)} finished jobs within {BUSY_NVML_GAP_PP:g} points "
          f"({len(table) - len(ok)} not finished).")
    return 0 if ok and len(within) == len(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
