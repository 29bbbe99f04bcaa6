"""The scaling check: the same sweep through the Ray launcher on one GPU, then on
every GPU of the machine; the many-GPU wall time should be at most 0.6 of the one-GPU one.

    python bench/gpu_scaling.py --out-dir /tmp/scaling [--md bench/results/scaling/NAME.md] \
        model=resnet18,resnet34 autotune=on,off mode=inference

Each sweep is a fresh `python -m sweeper` (its own embedded Ray) into its own folder;
the one-GPU run sees only the first GPU (CUDA_VISIBLE_DEVICES), so Ray sizes itself to
it. Prints a markdown table: sweep wall time, each job's own run time and status.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def visible_gpus() -> list[str]:
    if os.environ.get("CUDA_VISIBLE_DEVICES"):
        return os.environ["CUDA_VISIBLE_DEVICES"].split(",")
    out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def sweep(overrides: list[str], gpus: list[str], sweep_dir: Path) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(gpus))
    t0 = time.time()
    with open(sweep_dir.parent / f"{sweep_dir.name}.log", "w") as log:
        proc = subprocess.run([sys.executable, "-m", "sweeper", *overrides, f"hydra.sweep.dir={sweep_dir}"],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    wall = time.time() - t0
    summary = json.loads((sweep_dir / "summary.json").read_text())
    jobs = []
    for j in summary["jobs"]:
        rec = json.loads((Path(j["dir"]) / "result.json").read_text())
        jobs.append({"name": " ".join(j["overrides"]), "status": rec["status"],
                     "process_s": rec["job"].get("process_s") or rec["job"]["duration_s"],
                     "compile_s": (rec.get("timings") or {}).get("compile_s"),
                     "gpu": (rec.get("environment") or {}).get("gpu"), "visible": (rec.get("environment") or {}).get("cuda_visible_devices"),
                     # cores other work kept busy during the job's compile (tasks/host_load.py)
                     "other_cores_compile": ((rec.get("timings") or {}).get("host_busy_cores") or {}).get("compile")})
    return {"gpus": len(gpus), "wall_s": wall, "rc": proc.returncode, "jobs": jobs}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--also-share", action="store_true",
                    help="a third sweep on every GPU with hydra.launcher.compile_threads=share")
    ap.add_argument("--reuse", action="store_true",
                    help="take the one-GPU and many-GPU sweeps from OUT_DIR/scaling.json of an earlier run "
                         "(so that --also-share can run later, when there is time for it)")
    ap.add_argument("overrides", nargs="+")
    args = ap.parse_args()
    gpus = visible_gpus()
    if len(gpus) < 2:
        print(f"needs at least two GPUs, found {gpus}", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    earlier = args.out_dir / "scaling.json"
    if args.reuse and earlier.exists():
        runs = json.loads(earlier.read_text())[:2]
    else:
        runs = [sweep(args.overrides, gpus[:1], args.out_dir / "gpu1"),
                sweep(args.overrides, gpus, args.out_dir / f"gpu{len(gpus)}")]
    if args.also_share:
        runs.append(sweep([*args.overrides, "hydra.launcher.compile_threads=share"], gpus,
                          args.out_dir / f"gpu{len(gpus)}_share"))
        runs[-1]["note"] = "compile_threads=share"
    ratio = runs[1]["wall_s"] / runs[0]["wall_s"]
    lines = [f"command: `python bench/gpu_scaling.py --out-dir {args.out_dir} {'--also-share ' if args.also_share else ''}{' '.join(args.overrides)}`", "",
             "| GPUs | sweep wall s | exit | jobs (status, process s, compile s, CUDA_VISIBLE_DEVICES) |", "|---|---|---|---|"]
    for r in runs:
        cells = "; ".join(f"{j['name']}: {j['status']}, {j['process_s']:.0f}, {j['compile_s'] or 0:.0f}, GPU {j['visible']}"
                          + (f", other cores busy in compile {j['other_cores_compile']:.1f}"
                             if j.get("other_cores_compile") is not None else "")
                          for j in r["jobs"])
        lines.append(f"| {r['gpus']}{' (' + r['note'] + ')' if r.get('note') else ''} | {r['wall_s']:.1f} | {r['rc']} | {cells} |")
    lines += ["", f"{len(gpus)}-GPU wall / 1-GPU wall = **{ratio:.2f}** (target at most 0.6)"]
    if args.also_share:
        lines.append(f"with compile_threads=share: **{runs[2]['wall_s'] / runs[0]['wall_s']:.2f}**")
    text = "\n".join(lines) + "\n"
    print(text)
    (args.out_dir / "scaling.json").write_text(json.dumps(runs, indent=1))
    if args.md:
        args.md.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
