"""Hydra callbacks of the primary config (conf/config.yaml, hydra.callbacks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from sweeper.sweep.validate import SweepConfigError, check_declared_keys, check_output_dir, stop_on_problem


# The launcher every sweep runs through (hydra_plugins/sweeper_ray): one lifecycle of a
# sweep's jobs (resume, ordering, the stores' exchange, packing, records), on this machine
# (an embedded Ray) or a cluster. Its Hydra config (hydra_plugins/sweeper_ray/_config.py)
# names it with this.
OUR_LAUNCHER = "hydra_plugins.sweeper_ray.ray_launcher.RayLauncher"


def launcher_problem(config: DictConfig) -> str | None:
    """Why Hydra would run the jobs some other way than through sweeper's launcher, or None:
    another launcher (Hydra's basic one, say) or hydra.mode=RUN calls the task function job
    by job, with none of the sweep's lifecycle."""
    mode = str(config.hydra.get("mode") or "")
    if mode.endswith("RUN") and not mode.endswith("MULTIRUN"):
        return ("hydra.mode=RUN runs one job in this process, outside sweeper's launcher; leave hydra.mode as "
                "the primary config sets it (MULTIRUN: a single job is a sweep of one)")
    target = str(config.hydra.launcher.get("_target_") or "")
    if target != OUR_LAUNCHER:
        return (f"hydra/launcher: {target or 'none'} is not sweeper's launcher; every sweep runs through "
                "hydra/launcher=sweeper_ray (the default: an embedded local Ray on this machine, or a cluster "
                "with hydra.launcher.address), which keeps finished jobs, orders them and carries the stores; "
                "drop the hydra/launcher override")
    return None


def check_launcher(config: DictConfig) -> None:
    """SweepConfigError where launcher_problem() finds one."""
    problem = launcher_problem(config)
    if problem:
        raise SweepConfigError(f"{problem}; no job was run")


class Preflight(Callback):
    """Checks that need only the composed config, run before Hydra's sweeper creates the
    sweep folder: a folder that cannot be written stops the sweep here, with the fix,
    instead of in a traceback from Hydra's mkdir (or, worse, after the first job); and
    jobs Hydra would run itself, job by job, are refused (launcher_problem)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        stop_on_problem(check_launcher, config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        stop_on_problem(check_launcher, config)
        # keys added with `+` before Hydra writes anything (swept ones: the launcher's checks)
        keys = [str(k) for k in config.keys() if k != "hydra"]
        stop_on_problem(check_declared_keys, OmegaConf.to_container(OmegaConf.masked_copy(config, keys)))
        from sweeper.sweep.control import confirm, grid_size, lock_sweep, note_new_folders

        if not config.get("dry_run"):  # a large grid is refused (or confirmed) before Hydra builds its jobs
            size = grid_size(list(config.hydra.overrides.task))
            if size is not None:
                confirm(size, {"confirm_above": config.confirm_above, "yes": config.yes})

        sweep_dir = Path(str(config.hydra.sweep.dir))
        note_new_folders(sweep_dir)  # a sweep that runs no job takes them away again
        stop_on_problem(check_output_dir, sweep_dir)
        # before Hydra writes multirun.yaml: a refused sweep touches nothing of a running one
        lock_sweep(sweep_dir)
