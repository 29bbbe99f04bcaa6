"""python -m sweeper [key=value ...]: run a sweep of jobs (see conf/config.yaml).

Comma lists sweep without -m (the primary config sets hydra.mode=MULTIRUN):
    python -m sweeper model=mixnet_l,densenet121 autotune=on,off
"""

from __future__ import annotations

import sys
import time

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from sweeper.config import register
from sweeper.launch import run_job_process

register()

# Statuses of the jobs this process ran, for the exit code (Hydra's basic launcher runs
# jobs in this process, one after another).
_finished: list[tuple[str, str, str | None, str]] = []


def _job_name(overrides: list[str]) -> str:
    return " ".join(overrides) or "defaults"


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def run_one(cfg: DictConfig) -> str:
    hc = HydraConfig.get()
    job_dir = hc.runtime.output_dir
    overrides = list(hc.overrides.task)
    name = _job_name(overrides)
    spec = {
        "job_id": str(hc.job.num) if hc.job.get("num") is not None else "0",
        "overrides": overrides,
        "config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
    }
    t0 = time.time()
    print(f"[job {spec['job_id']}] {name} -> {job_dir}", flush=True)

    def progress(line: str) -> None:
        print(f"[job {spec['job_id']} {time.time() - t0:6.0f}s] {line}", flush=True)

    from pathlib import Path

    record = run_job_process(spec, Path(job_dir), cfg.timeout_s or None, progress)
    _finished.append((name, record["status"], record.get("reason"), job_dir))
    return record["status"]


def main() -> None:
    run_one()
    failed = [f for f in _finished if f[1] == "failed"]
    for name, status, reason, job_dir in _finished:
        tail = f": {reason}" if reason else ""
        print(f"{status:8s} {name}{tail}  ({job_dir})")
    if failed:
        print(f"{len(failed)} of {len(_finished)} jobs failed; each job's log is job.log in its folder.",
              file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
