"""What each generated kernel stores, from Inductor's scheduler as it generates the kernel,
kept with the kernel's stack traces so that a compile loaded from a cache carries it too.

Inductor's origins of a kernel (the FX nodes its stack traces and its provenance map list)
are more than the nodes it computes: an FX node lowered while an extern call or a reduction
realizes its inputs takes the origins of those inputs' whole chains (ir.gather_origins),
and a kernel that only *reads* the reduction's result lists them too (a ViT's last layer
norm kernel named the residual adds of its first block). What a kernel computes is what
lies upstream of the values it stores: so, where Inductor registers a kernel's provenance
(debug.set_kernel_post_grad_provenance_tracing, called by the Triton and C++ code
generators with the kernel's scheduler nodes), this records each scheduler node's stored
value: its buffer's `origin_node` where that is among its origins, else the origins no
other origin uses; nodes an extern call computes and graph-wide constants left out. The
names go into Inductor's own kernel stack-trace table as one line,
``[sweeper stores] <node> <node> ...``, which Inductor saves with the compiled graph and
logs again on a cache hit; sweeper/analysis/launch_sites.py walks back from them through
the tagged nodes' inputs. Read on torch 2.11 and 2.14.1; where the function or the table is
not there, nothing is recorded and the analysis keeps every origin (launch_sites.sites_of).
"""

from __future__ import annotations

import sys
from typing import Any

from sweeper.analysis.node_tags import STORES

_externs: dict[int, set] = {}


def _extern_nodes(graph) -> set:
    """The FX nodes extern calls compute in this graph (once a graph)."""
    key = id(graph)
    if key not in _externs:
        from torch._inductor import ir

        out = set()
        for op in getattr(graph, "operations", ()):
            if isinstance(op, ir.ExternKernel):
                if op.origin_node is not None:
                    out.add(op.origin_node)
                overload = getattr(op, "op_overload", None)
                out |= {n for n in op.origins if overload is not None and n.target == overload}
        _externs.clear()  # one graph at a time: the last one's only
        _externs[key] = out
    return _externs[key]


def stored_nodes(node_schedule: Any, graph) -> list[str]:
    """The FX nodes whose values a generated kernel's scheduler nodes store."""
    externs = _extern_nodes(graph)
    out: dict[str, None] = {}
    for snode in node_schedule:
        buf = getattr(snode, "node", None)
        if buf is None or not hasattr(buf, "origins"):
            continue  # the reduction markers between a kernel's loops
        origins = {n for n in buf.origins if n not in externs and n.all_input_nodes}
        value = buf.get_origin_node() if hasattr(buf, "get_origin_node") else None
        values = [value] if value in origins else [n for n in origins if not any(u in origins for u in n.users)]
        for n in sorted((v for v in values if v is not None), key=lambda n: n.name):
            out[n.name] = None
    return list(out)


def install() -> bool:
    """Wrap Inductor's provenance registration (in every module that imported it by name) so
    that each generated kernel's stack traces gain the `[sweeper stores]` line. Returns
    whether it is installed."""
    try:
        import torch._inductor.debug as debug
        from torch._inductor.virtualized import V
    except ImportError:
        return False
    original = getattr(debug, "set_kernel_post_grad_provenance_tracing", None)
    table = getattr(debug, "_inductor_kernel_stack_trace", None)
    if original is None or table is None or getattr(original, "_sweeper_stores", False):
        return original is not None and getattr(original, "_sweeper_stores", False)

    def registered(node_schedule, kernel_name, *args, **kwargs):
        handle = original(node_schedule, kernel_name, *args, **kwargs)
        is_extern = kwargs.get("is_extern", args[0] if args else False)
        if handle is not None and not is_extern and isinstance(node_schedule, list):
            try:
                names = stored_nodes(node_schedule, V.graph)
                traces = debug._inductor_kernel_stack_trace.get(f"{kernel_name}:{handle}")
                if names and traces is not None:
                    traces.append(f"  {STORES} {' '.join(names)}\n")
            except Exception:  # noqa: BLE001 - provenance is a debugging aid to Inductor: never break a compile
                pass
        return handle

    registered._sweeper_stores = True  # type: ignore[attr-defined]
    for name, mod in list(sys.modules.items()):
        if name.startswith("torch._inductor") and getattr(mod, "set_kernel_post_grad_provenance_tracing",
                                                           None) is original:
            setattr(mod, "set_kernel_post_grad_provenance_tracing", registered)
    return True
