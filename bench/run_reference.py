"""Run PyTorch's own `python <module>.py -p` harness on the compiled modules a sweeper job
captured, several times each, saving each run's output in <job_dir>/reference/.

    python bench/run_reference.py --runs 3 outputs/<sweep>/0 [more job dirs]

Each run is a fresh process, as by hand; it reads the job's own Inductor and Triton
caches (so kernels load instead of compiling) and writes its fixed-path trace into a
private temp folder. Needs the job's GPU. Compare with bench/compare_reference.py.

After each run, this process reads the host's launch speed (tasks/timing.launch_probe_us,
the probe the job reads before each of its rounds) and appends it to the run's output:
the harness times its module in the last seconds of its run, so the reading shows what
speed the host launched at then (on the H200, three `-p` runs of one module read 16.6, 25.7 and 27.0 ms).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.record import read_record  # noqa: E402
from sweeper.analysis.reference import LAUNCH_PROBE_LINE, harness_env  # noqa: E402
from tasks.timing import launch_probe_us  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("job_dirs", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    failed: list[str] = []
    for job_dir in args.job_dirs:
        record = read_record(job_dir)
        if record["status"] != "ok":
            print(f"skip {job_dir}: status {record['status']}")
            continue
        out_dir = job_dir / "reference"
        device = "cuda" if (record.get("environment") or {}).get("gpu") else "cpu"
        out_dir.mkdir(exist_ok=True)
        for m in record["modules"]:
            module = module_file(m)
            if module is None:
                failed.append(f"{job_dir.name} {m['label']}: neither {m.get('source_path')} (the node's cache, "
                              f"removed with the job's scratch folder) nor its copy {m.get('artifact')} exists")
                continue
            for i in range(args.runs):
                with tempfile.TemporaryDirectory() as tmp:
                    env = harness_env(record, os.environ, tmp)
                    t0 = time.time()
                    proc = subprocess.run([sys.executable, module, "-p"], env=env,
                                          capture_output=True, text=True)
                    took = time.time() - t0
                if proc.returncode != 0:
                    failed.append(f"{job_dir.name} {m['label']} run {i}: exit {proc.returncode} ({out_dir})")
                probe = statistics.median(launch_probe_us(device) for _ in range(5))
                out = out_dir / f"{m['label']}_run{i}.txt"
                out.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr[-20000:]
                               + f"\n--- exit {proc.returncode}, {took:.1f} s ---\n"
                               + LAUNCH_PROBE_LINE.format(probe) + "\n")
                line = [l for l in proc.stdout.splitlines() if l.startswith("Output for tabulate")]
                print(f"{job_dir.name} {m['label']} run {i}: {took:.1f} s exit {proc.returncode}, "
                      f"launch {probe:.2f} us; {line[-1] if line else '(no tabulate line)'}", flush=True)
    if failed:  # a run that failed is no reference: say which, and exit non-zero
        print(f"{len(failed)} module run(s) failed:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


def module_file(m: dict) -> str | None:
    """The module to run: where Inductor wrote it, if that is still there (a job's cache
    under `cache_root`), else its copy in the job folder (`artifact`); None if neither."""
    for path in (m.get("source_path"), m.get("artifact")):
        if path and Path(path).is_file():
            return path
    return None


if __name__ == "__main__":
    sys.exit(main())
