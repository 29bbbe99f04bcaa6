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

from sweeper.stores import exchange
from sweeper.sweep import pythons, summary as sm
from sweeper.sweep.hydra_setup import register
from sweeper.sweep.control import job_spec, sigterm_as_interrupt
from sweeper.sweep.show_config import sweep_configs, wants_config, without_multirun
from sweeper.sweep.job_process import failed_record, progress_printer, run_job_process
from sweeper.record import write_record
from sweeper.sweep.overrides import check as check_overrides
from sweeper.sweep.validate import SweepConfigError, job_problems, stop_on_problem

register()

# Jobs run through the task function below (Hydra's basic launcher only).
_basic: dict = {"jobs": [], "started": time.time(), "sweep_dir": None}


# An absolute path: Hydra resolves a relative one against the calling file under
# `python -m sweeper`, but against a module path ("conf", not found) under the installed
# `sweeper` console script. conf/ sits beside the package (an editable install).
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def run_one(cfg: DictConfig) -> str:
    hc = HydraConfig.get()
    job_dir = Path(hc.runtime.output_dir)
    overrides = list(hc.overrides.task)
    num = int(hc.job.num) if hc.job.get("num") is not None else 0
    spec = job_spec(num, overrides, cfg)
    print(f"[job {num}] {' '.join(overrides) or 'defaults'} -> {job_dir}", flush=True)
    problems = job_problems(spec["config"]) + _python_problems(spec)
    if problems:  # the Ray launcher checks the whole sweep first; here each job alone
        record = failed_record(spec, job_dir, "; ".join(problems), 0.0)
        write_record(job_dir, record)
    else:
        try:
            record = run_job_process(exchange.with_seed(spec), job_dir, cfg.timeout_s or None,
                                     progress_printer(str(num)))
        except KeyboardInterrupt:  # the job was killed: what it had tuned still goes to the store
            stopped = failed_record(spec, job_dir, "cancelled (Ctrl-C or SIGTERM) before it finished", 0.0,
                                    status="cancelled")
            write_record(job_dir, exchange.bring_back(spec, job_dir, stopped))
            raise
        record = exchange.bring_back(spec, job_dir, record)
    _basic["sweep_dir"] = job_dir.parent
    _basic["jobs"].append(sm.job_entry(num, overrides, job_dir, record))
    sm.write_summary(job_dir.parent, _basic["jobs"], _basic["started"], sys.argv[1:], done=False)
    return record["status"]


def _python_problems(spec: dict) -> list[str]:
    """The job's interpreter (config key `python`) into its spec, checked first."""
    try:
        envs = pythons.assign_interpreters([spec])
    except SweepConfigError as e:
        return [str(e)]
    for name, exe in envs.items():
        problem = pythons.problem(name, pythons.probe(exe), need_triton=False)
        if problem:
            return [problem]
    return []


def main() -> None:
    """The Ray launcher ends its sweep itself (sm.close_sweep, exiting non-zero when a job
    failed); with Hydra's basic launcher the jobs ran through run_one() above, and the sweep
    ends here. `sweeper store ...` is the autotune store's own command (sweeper/store.py)."""
    if sys.argv[1:2] == ["store"]:
        from sweeper import store

        sys.exit(store.main(sys.argv[2:]))
    if not any(a in ("--help", "-h", "--hydra-help") for a in sys.argv[1:]):  # bad keys and values: exit 2
        stop_on_problem(check_overrides, sys.argv[1:], CONF_DIR)
    if wants_config(sys.argv[1:]):  # --cfg over a sweep: each job's config (show_config.py)
        shown = sweep_configs(sys.argv[1:], CONF_DIR)
        if shown is not None:
            for num, (overrides, text) in enumerate(shown):
                print(f"# job {num}: {' '.join(overrides)}\n{text}")
            return
        sys.argv = [sys.argv[0], *without_multirun(sys.argv[1:])]
    interrupted = False
    sigterm_as_interrupt()
    try:
        run_one()
    except KeyboardInterrupt:
        interrupted = True
    if _basic["jobs"]:
        sm.write_summary(_basic["sweep_dir"], _basic["jobs"], _basic["started"], sys.argv[1:], done=not interrupted)
        sys.exit(sm.close_sweep(_basic["sweep_dir"], _basic["jobs"], sys.argv[1:], interrupted))
    if interrupted:
        sys.exit(130)


if __name__ == "__main__":
    main()
