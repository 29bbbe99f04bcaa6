"""Where the test suite's CPU goes: `make test` run once with every sweep driver, job
process, `sweeper.aggregate` and `sweeper.history` process noting its own CPU as it exits
(a sitecustomize.py put first on PYTHONPATH, which the sweeps' Ray workers and job
processes inherit), summed by kind of process and by test file; and what importing torch,
Dynamo and Inductor costs one process on this machine, the floor under every job.

    python bench/test_suite_cpu.py [--out FILE] [--make-args 'PYTEST_ARGS=...']

A process's own CPU (user + system) is counted, and in a column of their own its children's
that it waited for: g++ under a job, the embedded Ray's own processes under the driver that
started it. Not counted: a cluster's Ray processes (a test starts those), pytest's workers
and the tests' in-process work, Chromium. A process killed outright (a job past its time
limit) writes nothing. CPU timings here move by a quarter between runs: compare within one
run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = ROOT / ".venv" / "bin" / "python"

# Each process of these kinds appends one line as it exits; a job process leaves through
# os._exit (tasks/job.py), which runs no atexit hook, so that is wrapped too.
SITECUSTOMIZE = r'''
import os, sys, time, json
_KINDS = ("tasks.job", "sweeper", "sweeper.history", "sweeper.aggregate")
_argv = getattr(sys, "orig_argv", [])
_kind = _argv[_argv.index("-m") + 1] if "-m" in _argv[:-1] else None
if _kind in _KINDS and os.environ.get("SWEEPER_CPU_LOG"):
    import atexit, resource
    _t0 = time.time()
    def _note():
        atexit.unregister(_note)  # once: os._exit's note, or atexit's
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        line = {"kind": _kind, "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0],
                "wall": round(time.time() - _t0, 2), "cpu": round(me.ru_utime + me.ru_stime, 2),
                "children_cpu": round(kids.ru_utime + kids.ru_stime, 2), "args": " ".join(_argv[3:])[:300]}
        with open(os.environ["SWEEPER_CPU_LOG"], "a") as f:
            f.write(json.dumps(line) + "\n")
    atexit.register(_note)
    _exit = os._exit
    def _exit_noted(code):
        try:
            _note()
        finally:
            _exit(code)
    os._exit = _exit_noted
'''

IMPORTS = ["torch", "torch, torch._dynamo", "torch, torch._dynamo, torch._inductor.compile_fx",
           "torch, torch._dynamo, torch._inductor.compile_fx, timm"]


def import_cpu(modules: str, rounds: int = 3) -> float:
    """The least CPU (user + system, s) of `rounds` fresh processes that import `modules`."""
    best = float("inf")
    for _ in range(rounds):
        before = os.times()
        subprocess.run([str(PY), "-c", f"import {modules}"], check=True, cwd=ROOT)
        after = os.times()
        best = min(best, (after.children_user - before.children_user) + (after.children_system - before.children_system))
    return round(best, 2)


def summary(rows: list[dict]) -> str:
    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in rows:
        k = kinds[r["kind"]]
        k[0] += 1
        k[1] += r["cpu"]
        k[2] += r["children_cpu"]
        f = files[r["test"].split("::")[0].replace("tests/", "") or "(outside a test)"]
        f[r["kind"] + " n"] += 1
        f[r["kind"]] += r["cpu"] + r["children_cpu"]
    out = ["| process | count | own CPU s | children's CPU s |", "|---|---|---|---|"]
    out += [f"| {k} | {n} | {cpu:.1f} | {kids:.1f} |" for k, (n, cpu, kids) in sorted(kinds.items(), key=lambda kv: -kv[1][1])]
    out += ["", "By test file (CPU s, own and children's; processes in brackets):", "",
            "| file | drivers | jobs | aggregate + history |", "|---|---|---|---|"]

    def cell(c: collections.Counter, *ks: str) -> str:
        return f"{sum(c[k] for k in ks):.1f} ({sum(c[k + ' n'] for k in ks)})"

    for name, c in sorted(files.items(), key=lambda kv: -(kv[1]["tasks.job"] + kv[1]["sweeper"])):
        out.append(f"| {name} | {cell(c, 'sweeper')} | {cell(c, 'tasks.job')} | "
                   f"{cell(c, 'sweeper.aggregate', 'sweeper.history')} |")
    jobs = sorted((r for r in rows if r["kind"] == "tasks.job"), key=lambda r: -(r["cpu"] + r["children_cpu"]))
    out += ["", "The costliest job processes:", "", "| own CPU s | children's CPU s | wall s | test |", "|---|---|---|---|"]
    out += [f"| {r['cpu']:.1f} | {r['children_cpu']:.1f} | {r['wall']:.1f} | {r['test'].split('::')[-1]} |" for r in jobs[:12]]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "test_suite" / "cpu_by_process.md")
    ap.add_argument("--make-args", default="", help="more arguments to make test, e.g. 'PYTEST_ARGS=-x'")
    args = ap.parse_args()
    hook = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    log = hook / "cpu.jsonl"
    env = dict(os.environ, SWEEPER_CPU_LOG=str(log),
               PYTHONPATH=os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    t0 = time.time()
    proc = subprocess.run(["make", "test", *args.make_args.split()], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - t0
    passed = [line for line in proc.stdout.splitlines() if any(w in line for w in (" passed", " failed", "no tests ran"))]
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    floors = {m: import_cpu(m) for m in IMPORTS}
    text = "\n".join([
        "# The test suite's CPU by process",
        "",
        f"{time.strftime('%Y-%m-%d')}, `python bench/test_suite_cpu.py` on {os.cpu_count()} cores: `make test` "
        f"exit code {proc.returncode} in {wall:.0f} s (install included); its pytest runs:",
        "",
        *[f"- `{line.strip()}`" for line in passed],
        "",
        summary(rows),
        "",
        "What a fresh process's imports cost here (CPU s, the least of 3):",
        "",
        "| `import ...` | CPU s |", "|---|---|",
        *[f"| {m} | {s} |" for m, s in floors.items()],
        "",
    ])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
