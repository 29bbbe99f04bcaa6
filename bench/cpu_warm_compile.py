"""A CPU job's compile, cold and then warm from the compile store: how long each took and
how many C++ files Inductor built (its compile_file timer), for a store whose blob comes
with the job's C++ kernel libraries and for one whose libraries were taken out (a store
written before they were kept, or of another host); then another job (seed=1), cold, on
the host that now keeps Inductor's instruction-set probes. Four sweeps through the real
command line, on a fresh host folder of probes and a fresh store.

    python bench/cpu_warm_compile.py [--out DIR] [job overrides...]

Prints a markdown table (and writes it to DIR/cpu_warm_compile.md with --out).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JOB = ["model=test_resnet", "mode=inference", "image_size=32", "batch_size=2", "measure.timed_steps=2",
       "measure.warmup_steps=1", "measure.profile_steps=1", "measure.module_rounds=2",
       "measure.module_calls_per_round=1", "measure.module_profile_calls=1", "measure.eager=false",
       "measure.steady_loop_s=0"]


def run(sweep_dir: Path, store: Path, overrides: list[str]) -> dict:
    t0 = time.time()
    env = dict(os.environ, SWEEPER_CPU_PROBES=str(store.parent / "probes"))
    proc = subprocess.run([sys.executable, "-m", "sweeper", *overrides, f"compile_store={store}",
                           f"hydra.sweep.dir={sweep_dir}"], cwd=ROOT, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"the sweep into {sweep_dir} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    t = json.loads((sweep_dir / "0" / "result.json").read_text())["timings"]
    built = (t.get("compile_timers") or {}).get("compile_file") or [0, 0.0]
    return {"sweep_s": round(time.time() - t0, 1), "compile_s": t["compile_s"], "cpp_files": built[0],
            "cpp_s": round(built[1], 1), "libraries_put_back": (t.get("compile_store") or {}).get("cpu_libraries", 0),
            "probes_given": (t.get("cpu_isa_probes") or {}).get("from_host", 0)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path)
    args, overrides = ap.parse_known_args()
    overrides = overrides or JOB
    with tempfile.TemporaryDirectory(prefix="cpu_warm_") as tmp:
        store = Path(tmp) / "store"
        rows = {"cold": run(Path(tmp) / "cold", store, overrides),
                "warm, libraries put back": run(Path(tmp) / "warm", store, overrides)}
        for libs in store.glob("torch-*/*.libs.tar.gz"):  # as a store without them
            libs.unlink()
        rows["warm, graphs only"] = run(Path(tmp) / "graphs_only", store, overrides)
        rows["another job (seed=1), cold"] = run(Path(tmp) / "other", store, [*overrides, "seed=1"])
    lines = [f"`python bench/cpu_warm_compile.py {' '.join(sys.argv[1:])}`".replace(" `", "`"), "",
             "| run | compile_s | C++ files built | g++ s (summed) | libraries put back | probes from the host | sweep s |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {r['compile_s']} | {r['cpp_files']} | {r['cpp_s']} | {r['libraries_put_back']} | "
              f"{r['probes_given']} | {r['sweep_s']} |"
              for name, r in rows.items()]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cpu_warm_compile.md").write_text(text)


if __name__ == "__main__":
    main()
