"""Inductor's provenance tracking, on for every job: which model code each kernel comes from.

torch keeps, for each kernel launch site of a compiled graph, the stack traces of the FX
nodes it computes (``trace.provenance_tracking_level = 1``), stores them with the compiled
graph in the FX graph cache, and logs them as the structured-trace artifact
``inductor_provenance_tracking_kernel_stack_traces`` right after the graph's
``inductor_output_code``, for a fresh compile and for a cache hit alike (codecache.py,
compile_fx.py; read on torch 2.14.1 and 2.11). Stack traces name the model's source lines
but not its modules: a Sequential's index is lost (``self.layer4(x)`` then ``self.bn2(x)``
for every block of layer4). So a post-grad pass of ours adds one line to each node's stack
trace naming its module, and for a matmul or convolution its FLOPs and bytes
(tasks/node_work.py), from the node's ``nn_module_stack`` (forward) or
``fwd_nn_module_stack`` (the forward module of a backward node, which AOTAutograd copies;
torch/_functorch/_aot_autograd/utils.py). The pass changes no node and no code, only that
text; its uuid is part of the FX graph cache key, so graphs compiled without it are not
mistaken for tagged ones. tasks/capture.py picks the artifact up per compiled module.
"""

from __future__ import annotations

from typing import Any

from sweeper.analysis.node_tags import BACKWARD, FORWARD, Work, tag_line
from tasks.node_work import is_constant, is_view, node_elements, node_work, op_name

# Bump when the tag's text changes: the cache key changes with it.
_PASS_VERSION = "sweeper-module-tags-6"


def _class_name(cls: Any) -> str:
    return getattr(cls, "__name__", None) or str(cls).rsplit(".", 1)[-1].strip("'>")


def _same_call_modules(graph) -> dict:
    """For nodes with no module stack, the module stack of a node of the same call: a
    decomposition (SiLU's backward into sigmoid, mul, sub, add) copies the stack trace of
    the node it replaces but not its `fwd_nn_module_stack`, so its nodes read as of no
    module; such a node takes the module of an FX neighbour with the very same stack
    trace that has one (through other such nodes), else none. Node -> module stack."""
    own = {n: n.meta.get("nn_module_stack") or n.meta.get("fwd_nn_module_stack")
           for n in graph.nodes if n.op == "call_function"}
    out: dict = {}
    for node, stack in own.items():
        text = node.meta.get("stack_trace")
        if stack or not text:
            continue
        seen, todo, found = {node}, [node], None
        while todo and found is None:
            n = todo.pop()
            for m in list(n.all_input_nodes) + list(n.users):
                if m in seen or m.meta.get("stack_trace") != text:
                    continue
                seen.add(m)
                if own.get(m):
                    found = own[m]
                    break
                todo.append(m)
        if found is not None:
            out[node] = found
    return out


def tag_graph(graph) -> int:
    """Append the tag to each call_function node's stack trace; returns how many nodes name
    a module. A node with no module stack (the loss, a layout copy) is tagged too, as of no
    module, so that a fused kernel's time is shared with it rather than given to the
    modules beside it, unless a neighbour of the same call names one (_same_call_modules);
    each tag carries the elements the node touches and whether it is a constant or a view
    (its share of a fused kernel's work: tasks/node_work.py), its op and its inputs.
    Every node of a backward graph is backward work, the forward ones it recomputes too
    (the partitioner's recomputation: mixnet_l's batch-norm backward kernels on an H100
    fuse it), so its pass is the graph's."""
    tagged = 0
    backward = any(n.op == "placeholder" and n.name.startswith("tangents") for n in graph.nodes)
    inherited = _same_call_modules(graph)
    for node in graph.nodes:
        if node.op != "call_function":
            continue
        text = node.meta.get("stack_trace") or ""
        if "[sweeper module]" in text:
            continue
        stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or inherited.get(node)
        pass_ = BACKWARD if backward or not node.meta.get("nn_module_stack") else FORWARD
        path, cls = list(stack.values())[-1] if stack else (None, None)  # the innermost module
        work = node_work(node)
        # autograd's "Gradient addition node" trace ends without a newline: the tag must
        # start a line of its own, or it is not read and the node's module is lost
        node.meta["stack_trace"] = text + ("\n" if text and not text.endswith("\n") else "") + tag_line(
            pass_, None if path is None else str(path), None if cls is None else _class_name(cls), node.name,
            Work(**work) if work else None, elems=node_elements(node), const=is_constant(node), view=is_view(node),
            op=op_name(node), inputs=tuple(n.name for n in node.all_input_nodes))
        tagged += stack is not None
    return tagged


def install() -> str:
    """Provenance tracking on and the tag pass installed (as Inductor's post-grad custom
    pre-pass, unless the user's options set one: then theirs runs and ours is not there,
    which the record says). Returns what was done, for the record."""
    from sweeper.torch_internals.probes import custom_graph_pass_class, inductor_config

    config = inductor_config()

    class ModuleTags(custom_graph_pass_class()):  # type: ignore[misc]
        def __call__(self, graph) -> None:
            tag_graph(graph)

        def uuid(self) -> str:
            return _PASS_VERSION

    config.trace.provenance_tracking_level = max(int(config.trace.provenance_tracking_level or 0), 1)
    from sweeper.torch_internals import kernel_stores

    kernel_stores.install()  # each generated kernel's stored values, beside its stack traces
    if config.post_grad_custom_pre_pass is not None:  # one process a job: only the user's options set it
        return "not installed: the job's inductor options set post_grad_custom_pre_pass"
    config.post_grad_custom_pre_pass = ModuleTags()
    return "installed"
