"""Inductor's options by their dotted names (torch._inductor.config), read and set: the
user's extra options (config key `inductor`, sweeper/inductor_options.py) are checked
against them on the driver before any job starts, and set in the job's process before it
compiles. Run on the TESTED_ON versions (sweeper/torch_internals/__init__.py); tests:
tests/test_config.py (an unknown option refused), tests/test_job_cpu.py (set and read back)."""

from __future__ import annotations

from typing import Any


def options() -> dict[str, Any]:
    """Every Inductor option, dotted name -> its value in this process."""
    import torch._inductor.config as inductor_config

    return inductor_config.get_config_copy()


def set_option(name: str, value: Any) -> None:
    """One option, by its dotted name ("triton.cudagraph_trees"), set in this process."""
    import torch._inductor.config as inductor_config

    owner: Any = inductor_config
    for part in name.split(".")[:-1]:
        owner = getattr(owner, part)
    setattr(owner, name.split(".")[-1], value)
