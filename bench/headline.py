"""The headline command's sweeps, measured: wall time, each job's phases and compile split,
what dominates, and the later run against the first. On the GPU machine (bench/gpu_run.sh
headline runs it):

    python -m sweeper model=mixnet_l,densenet121 autotune=on,off     # twice
    python bench/headline.py outputs/DATE/FIRST outputs/DATE/SECOND > headline.md

A first run finished across sittings (bench/gpu_run.sh headline_sitting) lists each
resumed job's stopped runs beside its last one, and the cold work: every run added up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.record import read_record  # noqa: E402
from sweeper.reporting.compile_state import compile_s_before, compile_state  # noqa: E402
from sweeper.reporting.labels import record_label  # noqa: E402

PHASES = ("setup", "build", "eager", "compile", "warmup", "timing", "steady_loop", "time_modules", "profile_step",
          "profile_modules", "microbench_prepare", "microbench")


def one_sweep(sweep: Path) -> tuple[float, list[dict]]:
    summary = json.loads((sweep / "summary.json").read_text())
    recs = []
    for job in summary["jobs"]:
        try:
            recs.append(read_record(Path(job["dir"]) if Path(job["dir"]).exists() else sweep / str(job["num"])))
        except Exception as e:  # noqa: BLE001 - a job without a record is listed, not fatal
            print(f"job {job['num']}: no record ({e})")
    recs.sort(key=lambda r: r["job"].get("started_at") or "")
    return float(summary["elapsed_s"]), recs


SPLIT = ("template_autotuning_s", "template_precompiling_s", "kernel_autotuning_s", "coordinate_descent_s",
         "fusion_benchmarking_s", "rest_s", "template_ops")


def table(recs: list[dict]) -> list[str]:
    out = ["| job (in the order they started) | status | compile state | started | job s | "
           + " | ".join(PHASES) + " | " + " | ".join(s.replace("_s", " s").replace("_", " ") for s in SPLIT)
           + " | choices from the store | new in the store | compile MB |",
           "|---" * (5 + len(PHASES) + len(SPLIT) + 3) + "|"]
    for r in recs:
        t = r.get("timings") or {}
        phase, split, store = t.get("phase_s") or {}, t.get("compile_split_s") or {}, t.get("autotune_store") or {}
        size = (t.get("compile_store") or {}).get("job_bytes")
        out.append(f"| {record_label(r)} | {r['status']} | {compile_state(t)} "
                   f"| {(r['job'].get('started_at') or '')[11:19]} | {r['job'].get('duration_s')} | "
                   + " | ".join(str(phase.get(p, "–")) for p in PHASES) + " | "
                   + " | ".join(str(split.get(k, "–")) for k in SPLIT)
                   + f" | {store.get('seeded_entries')} | {store.get('new_in_store')} "
                     f"| {'–' if size is None else round(size / 1e6, 1)} |")
    return out


def timers(recs: list[dict]) -> list[str]:
    """Each job's costliest Inductor timers (they nest: a breakdown of where, not a sum)."""
    out = []
    for r in recs:
        top = list(((r.get("timings") or {}).get("compile_timers") or {}).items())[:8]
        if top:
            out.append(f"- {record_label(r)}: " + ", ".join(f"{k} {s:.0f} s ({n})" for k, (n, s) in top))
    return out


def attempts(recs: list[dict]) -> tuple[list[str], float]:
    """Jobs run again after stopped runs (a sweep finished across sittings): each stopped
    run's seconds, how far its compile got and what it gave the store, beside this run's
    compile; and the cold work, every run of every job added up."""
    out, cold = [], 0.0
    for r in recs:
        store = (r.get("timings") or {}).get("autotune_store") or {}
        earlier = store.get("earlier_attempts") or []
        cold += all_runs_s(r)
        if not earlier:
            continue
        runs = "; ".join(f"run {i}: {a.get('status')} after {a.get('duration_s')} s, compile stopped at "
                         f"{a.get('phase_s_at_stop')} s, {a.get('seeded_ops', '–')} ops from the store, gave "
                         f"{a.get('new_in_store')} timed choices and "
                         f"{a.get('new_kernel_configs_in_store')} kernel configs"
                         for i, a in enumerate(earlier, 1))
        compile_s = (r.get("timings") or {}).get("compile_s")
        if compile_s is None:  # this run was stopped too: how far its compile got, if it said
            compile_s = store.get("phase_s_at_stop", "–")
        before_s = compile_s_before(r.get("timings") or {}) or 0
        out.append(f"- {record_label(r)}: {runs}; run {len(earlier) + 1} (this one): {r['status']}, "
                   f"{store.get('seeded_ops', '–')} ops and {store.get('seeded_kernel_configs', '–')} kernel "
                   f"configs from the store, compile {compile_s} s against {before_s:.0f} s of compile in the "
                   f"runs before it")
    return out, cold


def job_seconds(recs: list[dict]) -> dict[str, float]:
    """Each job's seconds, its stopped runs' included, by its label."""
    return {record_label(r): all_runs_s(r) for r in recs}


def all_runs_s(r: dict) -> float:
    """A job's seconds over this run and every stopped run before it."""
    earlier = ((r.get("timings") or {}).get("autotune_store") or {}).get("earlier_attempts") or []
    return (r["job"].get("duration_s") or 0) + sum(a.get("duration_s") or 0 for a in earlier)


def dominant(recs: list[dict]) -> str:
    """The longest job and its largest phases."""
    longest = max(recs, key=lambda r: r["job"].get("duration_s") or 0)
    phases = sorted((longest.get("timings") or {}).get("phase_s", {}).items(), key=lambda kv: -kv[1])[:3]
    return (f"longest job: {record_label(longest)}, {longest['job'].get('duration_s')} s; its largest "
            f"phases: " + ", ".join(f"{k} {v:.0f} s" for k, v in phases))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("sweeps", nargs="+", type=Path, help="the first run, then later runs of the same command")
    args = ap.parse_args()
    walls, colds, acrosses, runs = [], [], [], []
    for sweep in args.sweeps:
        wall, recs = one_sweep(sweep)
        walls.append(wall)
        runs.append(recs)
        resumed, cold = attempts(recs)
        colds.append(cold)
        across = bool(resumed)  # finished across sittings: the summary's wall is the last sitting's only
        acrosses.append(across)
        print(f"## {sweep.name}: {wall:.0f} s wall{' in its last sitting' if across else ''} ({wall / 60:.1f} min), "
              f"{sum(r['status'] == 'ok' for r in recs)} of {len(recs)} jobs ok\n")
        print("\n".join(table(recs)))
        print(f"\n{dominant(recs)}")
        if timers(recs):
            print("\nInductor's costliest timers per job (seconds, calls; nested, so they overlap):\n")
            print("\n".join(timers(recs)))
        if resumed:
            print("\nJobs run again after stopped runs (across sittings):\n")
            print("\n".join(resumed))
            print(f"\nthe cold work, every run of every job added up: {cold:.0f} s ({cold / 60:.1f} min)")
        one_gpu = sum(r["job"].get("duration_s") or 0 for r in recs)
        print(f"\nthe jobs' own seconds added up (one GPU running them in turn, an estimate, not a run): {one_gpu:.0f} s"
              + ("; its runs in earlier sittings are not in the wall time above\n" if across
                 else f"; this run's wall time against it: {wall / one_gpu:.2f}\n"))
    for sweep, wall, recs in zip(args.sweeps[1:], walls[1:], runs[1:]):
        ok = [r for r in recs if r["status"] == "ok"]
        if len(ok) < len(recs):  # a stopped run's wall time is no measure of the command's
            print(f"{sweep.name}: {len(ok)} of {len(recs)} jobs finished, so no ratio for the run; each "
                  f"finished job against its cold seconds in {args.sweeps[0].name} (every run of it added up):")
            cold = job_seconds(runs[0])
            for r in ok:
                label, s = record_label(r), r["job"].get("duration_s") or 0
                print(f"- {label}: {s:.0f} s / {cold[label]:.0f} s = {s / cold[label]:.2f}" if cold.get(label)
                      else f"- {label}: {s:.0f} s, not in {args.sweeps[0].name}")
            continue
        print(f"{sweep.name} against {args.sweeps[0].name}: {wall:.0f} s / {walls[0]:.0f} s = {wall / walls[0]:.2f}")
        if acrosses[0]:  # the first run was finished across sittings: its wall is only the last one's
            print(f"{sweep.name} against the cold work of every run before: {wall:.0f} s / {colds[0]:.0f} s "
                  f"= {wall / colds[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
