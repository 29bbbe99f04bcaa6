"""The work of one post-grad FX node, from the shapes and dtypes its compile saw: FLOPs by
PyTorch's own formulas (torch.utils.flop_counter's registry: mm, addmm, bmm, convolution
and its backward, attention), and the bytes its tensor inputs and outputs span. Read by the
tag pass (tasks/provenance.py), so that a library kernel's launch site carries the work of
the op it computes; sweeper/analysis/roofline.py turns it into a bound."""

from __future__ import annotations

from typing import Any


def _vals(x: Any) -> Any:
    """An FX argument with each node replaced by the value its compile traced (a fake tensor)."""
    import torch.fx

    if isinstance(x, torch.fx.Node):
        return x.meta.get("val")
    if isinstance(x, (list, tuple)):
        return type(x)(_vals(v) for v in x)
    if isinstance(x, dict):
        return {k: _vals(v) for k, v in x.items()}
    return x


def _tensors(x: Any) -> list:
    import torch

    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _nbytes(t) -> int | None:
    try:
        return int(t.numel()) * t.element_size()
    except Exception:  # noqa: BLE001 - a symbolic size (dynamic shapes): unknown, not guessed
        return None


def node_work(node) -> dict | None:
    """{"flops", "bytes", "dtype"} of a call_function node whose op has a FLOP formula; None
    for the rest (their bytes are the fused kernel's, which Inductor estimates itself)."""
    from torch.utils.flop_counter import flop_registry

    packet = getattr(node.target, "overloadpacket", None)
    formula = flop_registry.get(packet) if packet is not None else None
    if formula is None:
        return None
    args, kwargs, out = _vals(node.args), _vals(node.kwargs), node.meta.get("val")
    try:
        flops = int(formula(*args, **kwargs, out_val=out))
    except Exception:  # noqa: BLE001 - a formula that cannot read these shapes: the node's work is unknown
        return None
    inputs = _tensors(args) + _tensors(kwargs)
    sizes = [_nbytes(t) for t in inputs + _tensors(out)]
    dtype = str(inputs[0].dtype).removeprefix("torch.") if inputs else None
    return {"flops": flops, "bytes": sum(sizes) if None not in sizes else None, "dtype": dtype}
