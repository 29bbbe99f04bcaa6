"""How a packed sweep used its GPU's lease (hydra.launcher.jobs_per_gpu; tasks/gpu_lease.py),
from its records: each job's start, the end of its compile and its holds of the lease, in
seconds from the sweep's first job; then the lease's busy share and the floor that packing
cannot beat, for one GPU: the earliest end of a compile plus every job's timed phases, which
the lease runs one after the other.

    python bench/packing.py SWEEP_DIR [SWEEP_DIR ...]
    e.g. tar xzf bench/results/packing/sweep_folders.tgz -C /tmp/p && python bench/packing.py /tmp/p/packed_run2
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path


def _t(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def jobs_of(sweep: Path) -> list[dict]:
    out = []
    for path in sorted(sweep.glob("[0-9]*/result.json"), key=lambda p: int(p.parent.name)):
        rec = json.loads(path.read_text())
        t, job = rec["timings"], rec["job"]
        phases = t.get("phase_s") or {}
        start = _t(job["started_at"])
        before_compile = sum(v for k, v in phases.items() if k in ("start", "setup", "build", "eager"))
        lease = t.get("gpu_lease") or {}
        out.append({"num": int(path.parent.name), "label": f"{rec['config']['model']} autotune={rec['config']['autotune']}",
                    "start": start, "end": _t(job["finished_at"]), "status": rec["status"],
                    "compile_end": start + before_compile + phases.get("compile", 0.0),
                    "compile_s": t.get("compile_s"), "held_s": (lease.get("held_s") or 0.0),
                    "wait_s": (lease.get("wait_s") or 0.0), "bench_wait_s": (lease.get("benchmarks") or {}).get("wait_s", 0.0),
                    "spans": lease.get("spans") or [], "per_gpu": lease.get("jobs_per_gpu")})
    return out


def report(sweep: Path) -> str:
    summary = json.loads((sweep / "summary.json").read_text())
    jobs = jobs_of(sweep)
    if not jobs:
        return f"## {sweep.name}\n\nno job records\n"
    t0 = min(j["start"] for j in jobs)
    lines = [f"## {sweep.name}", "",
             f"wall (summary.json elapsed_s) {summary.get('elapsed_s')} s; jobs a GPU: {jobs[0]['per_gpu']}", "",
             "| job | status | start s | compile s | compile ends s | lease held s | waited for it s (of which in compile) | timed phases held s | end s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for j in jobs:
        spans = ", ".join(f"{s[2]} {s[0] - t0:.0f}-{s[1] - t0:.0f}" for s in j["spans"])
        lines.append(f"| #{j['num']} {j['label']} | {j['status']} | {j['start'] - t0:.0f} | {j['compile_s']} | "
                     f"{j['compile_end'] - t0:.0f} | {j['held_s']:.1f} | {j['wait_s'] + j['bench_wait_s']:.1f} "
                     f"({j['bench_wait_s']:.1f}) | {spans} | {j['end'] - t0:.0f} |")
    held = sum(j["held_s"] for j in jobs)
    span = max(j["end"] for j in jobs) - t0
    first_compile = min(j["compile_end"] for j in jobs) - t0
    after = sum(s[1] - s[0] for j in jobs for s in j["spans"] if s[1] - t0 > first_compile)
    lines += ["", f"- the jobs' span {span:.0f} s; the lease held for timed phases {held:.0f} s in all "
              f"({100 * held / span:.0f}% of the span)",
              f"- the floor on one GPU: the first compile ends at {first_compile:.0f} s, and {after:.0f} s of timed "
              f"phases come after it, one job at a time: {first_compile + after:.0f} s", ""]
    return "\n".join(lines)


def main(args: list[str]) -> int:
    if not args:
        print(__doc__)
        return 2
    for d in args:
        print(report(Path(d)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
