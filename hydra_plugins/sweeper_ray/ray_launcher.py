from __future__ import annotations

from typing import Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.sweeper_ray._config import RayLauncherConf  # noqa: F401 (registers it)


class RayLauncher(Launcher):
    """Runs each job of a sweep as a Ray task in a fresh worker process (see _core.py)."""

    def __init__(self, **conf) -> None:
        self.conf = conf
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from hydra_plugins.sweeper_ray import _core

        return _core.launch(self, job_overrides, initial_job_idx)
