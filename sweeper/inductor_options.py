"""Extra TorchInductor options for a job (config key `inductor`), e.g.

    python -m sweeper model=resnet18 autotune=on +inductor.autotune_in_subproc=true,false

Hydra nests dotted keys (`+inductor.triton.cudagraph_trees=false` gives
{"triton": {"cudagraph_trees": False}}); they are flattened back to Inductor's own dotted
names here, checked against the installed torch's `torch._inductor.config` before any job
starts, and set in the job's process before it compiles (both through
sweeper/torch_internals/inductor_config.py). The compile mode's own options
(`autotune`, `cudagraphs`) are applied by torch.compile and win where they overlap.
"""

from __future__ import annotations

import difflib
from typing import Any

from sweeper.command_line import flatten  # noqa: F401 - also this module's


def problems(options: dict[str, Any]) -> list[str]:
    """One message per option that the installed Inductor does not have."""
    if not options:
        return []
    import torch

    from sweeper.torch_internals.inductor_config import options as inductor_options

    known = inductor_options()
    out = []
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
            hint = f"; closest: {', '.join(close)}" if close else ""
            out.append(f"inductor.{name}: not an option of torch._inductor.config (torch {torch.__version__}){hint}")
    return out


def apply(options: dict[str, Any]) -> None:
    """Set each option in this process's Inductor config (call before torch.compile)."""
    from sweeper.torch_internals.inductor_config import set_option

    for name, value in options.items():
        set_option(name, value)


def current(options: dict[str, Any]) -> dict[str, Any]:
    """The values this process's Inductor config holds for `options`' names (for the record)."""
    from sweeper.torch_internals.inductor_config import options as inductor_options

    known = inductor_options()
    return {name: known.get(name) for name in options}


# The options that make Inductor choose matmul and convolution implementations by timing
# them (select_algorithm.py), without the max-autotune mode (autotune=off).
TEMPLATE_OPTIONS = ("max_autotune", "max_autotune_gemm")


def tunes_templates(cfg: dict) -> bool:
    """Whether a job's compile times matmul/convolution choices: max-autotune on, or one of
    TEMPLATE_OPTIONS set true among its `inductor` options (the templates alone)."""
    options = flatten(cfg.get("inductor") or {})
    return bool(cfg.get("autotune")) or any(bool(options.get(k)) for k in TEMPLATE_OPTIONS)
