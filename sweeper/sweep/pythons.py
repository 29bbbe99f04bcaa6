"""The Python environments a sweep's jobs run in (config keys `python` and `pythons`), so
that one sweep can compare PyTorch builds: `python=stable,nightly` with
`pythons.stable=/opt/stable/bin/python`, `pythons.nightly=/opt/nightly/bin/python`.

Each job's process runs under its environment's interpreter with this repository's job
code on its PYTHONPATH (sweeper/sweep/job_process.py). Before any job starts, every
environment is checked (probe()): the interpreter runs, imports torch, timm (and Triton,
for GPU jobs) and the job code, and says their versions; a missing or broken one stops the
sweep with exit code 2. On a Ray cluster the check runs on every node (the Ray launcher's check_on_nodes()).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sweeper.sweep.validate import SweepConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]

# Run by the interpreter under check: versions, or the first import that failed.
_PROBE = r"""
import json, sys, platform
out = {"executable": sys.executable, "python": platform.python_version()}
try:
    import torch
    out["torch"] = torch.__version__
    import timm
    out["timm"] = timm.__version__
    try:
        import triton
        out["triton"] = triton.__version__
    except ImportError:
        out["triton"] = None
    import tasks.job  # the job code itself, with what it imports
except Exception as e:
    out["error"] = f"{type(e).__name__}: {e}"
print("SWEEPER_PROBE " + json.dumps(out))
"""


def resolve(value: str | None, names: dict | None) -> str | None:
    """The interpreter a job's `python` value names: a name from `pythons`, or a path (or a
    command on PATH). None: the driver's own interpreter."""
    if value is None or str(value) == "":
        return None
    names = dict(names or {})
    if value in names:
        return str(Path(os.path.expanduser(str(names[value]))))
    if "/" in str(value):
        return str(Path(os.path.expanduser(str(value))))
    found = shutil.which(str(value))
    if found:
        return found
    known = ", ".join(sorted(names)) or "none defined"
    raise SweepConfigError(f"python={value}: not a name in `pythons` ({known}) nor an interpreter path; define it "
                           f"once, e.g. +pythons.{value}=/path/to/venv/bin/python, or give the path; no job was run")


def probe(executable: str, timeout_s: float = 180.0) -> dict:
    """What the interpreter imports, as probe output; `error` says why it cannot run jobs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run([executable, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s,
                              env=env, cwd=str(REPO_ROOT))
    except FileNotFoundError:
        return {"executable": executable, "error": "no such interpreter (the file does not exist)"}
    except PermissionError:
        return {"executable": executable, "error": "not executable"}
    except subprocess.TimeoutExpired:
        return {"executable": executable, "error": f"did not answer within {timeout_s:.0f} s"}
    line = next((x for x in proc.stdout.splitlines() if x.startswith("SWEEPER_PROBE ")), None)
    if line is None:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"executable": executable, "error": f"exited {proc.returncode}: {tail}"}
    return json.loads(line[len("SWEEPER_PROBE "):])


def problem(name: str, info: dict, need_triton: bool) -> str | None:
    where = f"python={name} ({info['executable']})"
    if info.get("error"):
        return f"{where}: {info['error']}; fix that environment or leave it out of the sweep"
    if need_triton and not info.get("triton"):
        return f"{where}: does not import triton, which GPU jobs compile with; install the matching triton there"
    return None


def interpreter_line(name: str, info: dict) -> str:
    return (f"python={name}: {info['executable']} (Python {info.get('python')}, torch {info.get('torch')}, "
            f"triton {info.get('triton') or 'none'}, timm {info.get('timm')})")


def assign_interpreters(jobs: list) -> dict[str, str]:
    """Each job (sweeper/sweep/control.Job) given its interpreter (`python_executable`,
    which job_process runs) from its config's `python`; returns name
    -> interpreter of every environment the jobs name (SweepConfigError if one is neither
    a defined name nor a path)."""
    out: dict[str, str] = {}
    for job in jobs:
        cfg = job.spec.config
        exe = resolve(cfg.get("python"), cfg.get("pythons"))
        if exe is not None:
            out[str(cfg["python"])] = exe
            job.python_executable = exe
    return out


def check_here(envs: dict[str, str], need_triton: bool) -> tuple[dict[str, dict], list[str]]:
    """Probe each environment on this machine, at the same time: (infos, problems)."""
    with ThreadPoolExecutor(max_workers=max(1, len(envs))) as pool:
        infos = dict(zip(envs, pool.map(probe, envs.values())))
    problems = [p for name, info in infos.items() if (p := problem(name, info, need_triton))]
    return infos, problems


def check(envs: dict[str, str], need_triton: bool, probe_all=None) -> list[str]:
    """Probe every environment, here or with `probe_all(envs, need_triton)` -> (infos,
    problems) (on each node of a joined Ray cluster: hydra_plugins/sweeper_ray/_ray.py,
    check_on_nodes): a line describing each, or SweepConfigError naming every problem."""
    infos, problems = (probe_all or check_here)(envs, need_triton)
    if problems:
        raise SweepConfigError("; ".join(problems) + "; no job was run")
    return [interpreter_line(name, info) for name, info in infos.items()]
