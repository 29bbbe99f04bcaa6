"""The work of one post-grad FX node, from the shapes and dtypes its compile saw: FLOPs by
PyTorch's own formulas (torch.utils.flop_counter's registry: mm, addmm, bmm, attention)
except for convolutions, whose FLOPs come from sweeper/analysis/conv_flops.py (torch's
backward formula overcounts grouped convolutions), and the bytes its tensor inputs and
outputs span; and the elements a node touches, its share of a fused kernel's work. Read by
the tag pass (tasks/provenance.py), so that a library kernel's launch site carries the work
of the op it computes and a fused kernel's time is split by its nodes' work;
sweeper/analysis/roofline.py turns work into a bound."""

from __future__ import annotations

from math import prod
from typing import Any

# Ops that only re-index a tensor: inside a fused kernel they compute nothing of their own.
VIEW_OPS = frozenset({"view", "reshape", "_unsafe_view", "unsqueeze", "squeeze", "permute", "expand", "t",
                      "transpose", "slice", "select", "as_strided", "alias", "getitem", "unbind", "split",
                      "split_with_sizes", "view_as_real", "view_as_complex", "unfold", "narrow", "detach"})


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


def op_name(node) -> str:
    """The ATen op a node calls, without namespace or overload: "convolution_backward"."""
    packet = getattr(node.target, "overloadpacket", None)
    name = getattr(packet, "__name__", None) or getattr(node.target, "__name__", None) or str(node.target)
    return str(name).split(".")[-1]


def _shape(t) -> list[int]:
    return [int(s) for s in t.shape]


def _conv_flops(name: str, args: tuple, out: Any) -> int | None:
    """sweeper's convolution formulas (sweeper/analysis/conv_flops.py) on a node's traced values."""
    from sweeper.analysis.conv_flops import conv_backward_flops, conv_flops

    if name == "convolution":
        x, w = args[0], args[1]
        return conv_flops(_shape(x), _shape(w), _shape(out), bool(args[6]))
    if name == "convolution_backward":
        grad, x, w = args[0], args[1], args[2]
        return conv_backward_flops(_shape(grad), _shape(x), _shape(w), bool(args[7]), list(args[10]))
    return None


def node_work(node) -> dict | None:
    """{"flops", "bytes", "dtype"} of a call_function node whose op has a FLOP formula; None
    for the rest (their bytes are the fused kernel's, which Inductor estimates itself)."""
    from torch.utils.flop_counter import flop_registry

    packet = getattr(node.target, "overloadpacket", None)
    name = op_name(node)
    formula = flop_registry.get(packet) if packet is not None else None
    if formula is None and name not in ("convolution", "convolution_backward"):
        return None
    args, kwargs, out = _vals(node.args), _vals(node.kwargs), node.meta.get("val")
    try:
        if name in ("convolution", "convolution_backward") and not kwargs:
            flops = _conv_flops(name, args, out)
        elif formula is not None:
            flops = int(formula(*args, **kwargs, out_val=out))
        else:
            return None
    except Exception:  # noqa: BLE001 - a formula that cannot read these shapes: the node's work is unknown
        return None
    if flops is None:
        return None
    inputs = _tensors(args) + _tensors(kwargs)
    sizes = [_nbytes(t) for t in inputs + _tensors(out)]
    dtype = str(inputs[0].dtype).removeprefix("torch.") if inputs else None
    return {"flops": flops, "bytes": sum(sizes) if None not in sizes else None, "dtype": dtype}


def node_elements(node) -> int | None:
    """The elements a node touches at most (its output, or its largest tensor input: a
    reduction reads more than it writes): its weight among the nodes a fused kernel
    computes. None where a size is symbolic."""
    try:
        tensors = _tensors(node.meta.get("val")) + _tensors(_vals(node.args)) + _tensors(_vals(node.kwargs))
        return max((int(prod(int(s) for s in t.shape)) for t in tensors), default=0)
    except Exception:  # noqa: BLE001 - a symbolic size: no weight, the kernel's nodes then share evenly
        return None


def is_constant(node) -> bool:
    """A node that reads no tensor (`full`, `scalar_tensor`, `iota`, zeros and ones): one node
    for the whole graph, used by every kernel that needs its value, computing nothing of the
    module whose code first created it."""
    return node.op == "call_function" and not node.all_input_nodes


def is_view(node) -> bool:
    return op_name(node) in VIEW_OPS
