"""Bytes through the driver a job, with and without shared storage (hydra.launcher.storage_path).

One small CPU job (test_resnet inference) run cold, then warm from the compile store, on
the embedded Ray: once with the driver's disk (the default: the earlier compile goes out in
the job's spec, the job's folder comes back as a bundle), once with a storage folder (the
workers read and write it; only the record comes back). Prints a Markdown table from the
records (`job.driver_bytes`, `job.stored_bytes`, `timings.compile_store`) and the files in
each driver-side job folder.

    python bench/data_path.py [--model test_resnet] [--out bench/results/data_path/cpu.md]
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


def sweep(sweep_dir: Path, model: str, env: dict, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "sweeper", f"model={model}", *TINY, *args,
                           f"hydra.sweep.dir={sweep_dir}"], cwd=ROOT, capture_output=True, text=True, env=env,
                          timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return json.loads((sweep_dir / "0" / "result.json").read_text())


def row(path: str, run: str, rec: dict, job_dir: Path) -> str:
    through = rec["job"].get("driver_bytes") or {}
    store = (rec.get("timings") or {}).get("compile_store") or {}
    files = sum(1 for p in job_dir.rglob("*") if p.is_file() and ".hydra" not in p.parts)
    size = sum(p.stat().st_size for p in job_dir.rglob("*") if p.is_file() and ".hydra" not in p.parts)
    seeded = f"{store.get('bytes', 0):,}" + (f" (from {store['from']}, {store.get('fetched_bytes', 0):,} read)"
                                            if store.get("from") else "")
    return (f"| {path} | {run} | {through.get('out') or 0:,} | {through.get('back') or 0:,} | "
            f"{rec['job'].get('stored_bytes') or 0:,} | {seeded} | {store.get('kept_bytes') or 0:,} | "
            f"{files} files, {size:,} B |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="test_resnet")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    lines = [f"`python bench/data_path.py --model {args.model}` (embedded Ray, one CPU job a sweep)", "",
             "| data path | run | out to the job, B | back to the driver, B | written to storage, B | "
             "compile seeded, B | compile kept, B | driver's job folder |", "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for path in ("driver's disk", "storage folder"):
            base = Path(tmp) / path.split()[0].strip("'")
            env = dict(os.environ, SWEEPER_COMPILE_STORE=str(base / "compile_store"),
                       SWEEPER_SCRATCH=str(base / "scratch"))
            extra = [f"hydra.launcher.storage_path={base / 'storage'}"] if path == "storage folder" else []
            for run in ("cold", "warm"):
                rec = sweep(base / run, args.model, env, *extra)
                lines.append(row(path, run, rec, base / run / "0"))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
