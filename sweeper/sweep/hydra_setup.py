"""What Hydra is told before it composes the first config: the job schema (every key,
typed: sweeper/sweep/config.py) and the resolver behind `--help` (sweeper/sweep/help.py).
Apart from both, so that neither imports the other."""

from __future__ import annotations


def register() -> None:
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from sweeper.sweep.config import JobConfig
    from sweeper.sweep.help import help_text

    ConfigStore.instance().store(name="job_schema", node=JobConfig)
    # conf/config.yaml's hydra.help.template: `--help` lists these declarations
    OmegaConf.register_new_resolver("sweeper_help", help_text, replace=True)
