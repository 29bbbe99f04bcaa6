"""python -m sweeper [key=value ...]: run a sweep of jobs (see conf/config.yaml).

Comma lists sweep without -m (the primary config sets hydra.mode=MULTIRUN):
    python -m sweeper model=mixnet_l,densenet121 autotune=on,off

Jobs run on Ray by default (hydra_plugins/sweeper_ray). With hydra/launcher=basic they run
here, one after another, each still in its own process.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from sweeper.sweep import summary as sm
from sweeper.sweep.config import register
from sweeper.sweep.control import job_spec
from sweeper.sweep.job_process import failed_record, progress_printer, run_job_process
from sweeper.record import write_record
from sweeper.sweep.validate import job_problems

register()

# Jobs run through the task function below (Hydra's basic launcher only).
_basic: dict = {"jobs": [], "started": time.time(), "sweep_dir": None}


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def run_one(cfg: DictConfig) -> str:
    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    overrides = list(hc.overrides.task)
    num = int(hc.job.num) if hc.job.get("num") is not None else 0
    spec = job_spec(num, overrides, cfg)
    print(f"[job {num}] {' '.join(overrides) or 'defaults'} -> {job_dir}", flush=True)
    problems = job_problems(spec["config"])
    if problems:  # the Ray launcher checks the whole sweep first; here each job alone
        record = failed_record(spec, job_dir, "; ".join(problems), 0.0)
        write_record(job_dir, record)
    else:
        record = run_job_process(spec, job_dir, cfg.timeout_s or None, progress_printer(str(num)))
    _basic["sweep_dir"] = job_dir.parent
    _basic["jobs"].append(sm.job_entry(num, overrides, job_dir, record))
    sm.write_summary(job_dir.parent, _basic["jobs"], _basic["started"], sys.argv[1:], done=False)
    sm.LAST_SWEEP = {"sweep_dir": job_dir.parent, "jobs": _basic["jobs"], "command": sys.argv[1:]}
    return record["status"]


def main() -> None:
    interrupted = False
    try:
        run_one()
    except KeyboardInterrupt:
        interrupted = True
    if _basic["jobs"]:  # the basic launcher's last summary: is the sweep complete?
        sm.write_summary(_basic["sweep_dir"], _basic["jobs"], _basic["started"], sys.argv[1:], done=not interrupted)
    sweep = sm.LAST_SWEEP
    if sweep is not None:
        text, failed = sm.closing_report(sweep["jobs"], sweep["sweep_dir"], sweep["command"])
        print(text, flush=True)
        print(f"summary: {Path(sweep['sweep_dir']) / sm.SUMMARY_FILE}", flush=True)
        if not interrupted:
            _report(Path(sweep["sweep_dir"]))
    if interrupted:
        sys.exit(130)
    if sweep is not None and failed:
        sys.exit(1)


def _report(sweep_dir: Path) -> None:
    """Tables, figures and report.html. A failure here must not fail a finished sweep:
    the results are on disk, and `python -m sweeper.aggregate` can be run again."""
    from sweeper.aggregate import aggregate

    try:
        print(f"report: {aggregate(sweep_dir)}", flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"sweeper: the report could not be made ({type(e).__name__}: {e}); the results are kept. "
              f"Retry with: python -m sweeper.aggregate {sweep_dir}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
