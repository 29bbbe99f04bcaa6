"""Bytes through the driver a job, with and without shared storage (hydra.launcher.storage_path).

A sweep run cold, then warm from the compile store, on the embedded Ray: once with the
driver's disk (the default: the earlier compile goes out in the job's spec, the job's folder
comes back as a bundle), once with a storage folder (the workers read and write it; only
the record comes back). By default one small CPU job (test_resnet inference, tiny sizes);
on a GPU, any jobs (`--no-tiny --set ...`). Prints a Markdown table from the records, a row a
job a run (`job.driver_bytes`, `job.stored_bytes`, `timings.compile_store`, the compile's
seconds and state, kernels launched with a stored config, benchmarks at first launch) and
the files in each driver-side job folder.

    python bench/data_path.py [--model test_resnet] [--out bench/results/data_path/cpu.md]
    python bench/data_path.py --model resnet18 --no-tiny --set batch_size=32 --set autotune=on,off \
        --set hydra.launcher.jobs_per_gpu=2 --keep /tmp/gpu/data_path --out /tmp/gpu/data_path.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = ["mode=inference", "image_size=32", "batch_size=2", "measure.timed_steps=2", "measure.warmup_steps=1",
        "measure.profile_steps=1", "measure.module_rounds=2", "measure.module_calls_per_round=1",
        "measure.module_profile_calls=1", "measure.eager=false"]


def sweep(sweep_dir: Path, model: str, env: dict, *args: str) -> dict[int, dict]:
    """The sweep's records by job number."""
    proc = subprocess.run([sys.executable, "-m", "sweeper", f"model={model}", *args, f"hydra.sweep.dir={sweep_dir}"],
                          cwd=ROOT, capture_output=True, text=True, env=env, timeout=1800)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "sweep.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return {int(p.parent.name): json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/result.json"))}


def row(path: str, run: str, rec: dict, job_dir: Path) -> str:
    through = rec["job"].get("driver_bytes") or {}
    store = (rec.get("timings") or {}).get("compile_store") or {}
    files = sum(1 for p in job_dir.rglob("*") if p.is_file() and ".hydra" not in p.parts)
    size = sum(p.stat().st_size for p in job_dir.rglob("*") if p.is_file() and ".hydra" not in p.parts)
    seeded = f"{store.get('bytes', 0):,}" + (f" (from {store['from']}, {store.get('fetched_bytes', 0):,} read)"
                                            if store.get("from") else "")
    t = rec.get("timings") or {}
    state = "warm" if (t.get("compile_cache") or {}).get("fxgraph_hits") else "cold"
    benched = sum(((t.get("compile_benchmarks") or {}).get("not_reused") or {}).values())
    label = " ".join(o for o in rec["job"].get("overrides", []) if o.split("=")[0] in ("model", "autotune", "mode"))
    return (f"| {path} | {run} | {label} | {rec.get('status')} | {t.get('compile_s')} ({state}) | "
            f"{t.get('tuned_configs_reused')} | {benched} | {through.get('out') or 0:,} | "
            f"{through.get('back') or 0:,} | {rec['job'].get('stored_bytes') or 0:,} | {seeded} | "
            f"{store.get('kept_bytes') or 0:,} | {files} files, {size:,} B |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="test_resnet")
    ap.add_argument("--no-tiny", action="store_true", help="the model's own sizes and steps, not tiny ones")
    ap.add_argument("--set", action="append", default=[], help="another override of every sweep (repeatable)")
    ap.add_argument("--keep", type=Path, help="keep the sweep folders here (default: a temporary folder)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    overrides = ([] if args.no_tiny else TINY) + args.set
    command = (f"python bench/data_path.py --model {args.model}" + (" --no-tiny" if args.no_tiny else "")
               + "".join(f" --set {o}" for o in args.set))
    lines = [f"`{command}` (embedded Ray)", "",
             "| data path | run | job | status | compile s | kernels with a stored config | benchmarked at first "
             "launch | out to the job, B | back to the driver, B | written to storage, B | compile seeded, B | "
             "compile kept, B | driver's job folder |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        for path in ("driver's disk", "storage folder"):
            base = root / ("driver" if path.startswith("driver") else "storage")
            env = dict(os.environ, SWEEPER_COMPILE_STORE=str(base / "compile_store"),
                       SWEEPER_AUTOTUNE_STORE=str(base / "autotune_store"), SWEEPER_SCRATCH=str(base / "scratch"))
            extra = [f"hydra.launcher.storage_path={base / 'storage'}"] if path == "storage folder" else []
            for run in ("cold", "warm"):
                for num, rec in sweep(base / run, args.model, env, *overrides, *extra).items():
                    lines.append(row(path, run, rec, base / run / str(num)))
                print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
