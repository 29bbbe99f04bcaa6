"""Hydra callbacks of the primary config (conf/config.yaml, hydra.callbacks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from sweeper.sweep.validate import check_declared_keys, check_output_dir, stop_on_problem


class Preflight(Callback):
    """Checks that need only the composed config, run before Hydra's sweeper creates the
    sweep folder: a folder that cannot be written stops the sweep here, with the fix,
    instead of in a traceback from Hydra's mkdir (or, worse, after the first job)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
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
