"""A compiled module's launch sites and the model code each computes (pure: no torch): each
launch in a compiled module's wrapper code, in call order, with its kernel, provenance
handle and source nodes, joined with the tags its nodes carry (sweeper/analysis/node_tags.py)
into Sites, the unit sweeper/analysis/attribution.py places a trace's kernels on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from sweeper.analysis.node_tags import Layer, Tag, Work, read_stores, read_tags


_HANDLE_RE = re.compile(r"^\s*# \[Provenance debug handles\] (\S+):(\d+)\s*$")


_SOURCE_NODES_RE = re.compile(r"^\s*# Topologically Sorted Source Nodes: \[(.*?)\], Original ATen: \[(.*?)\]\s*$")


_FRAME_RE = re.compile(r'^\s*File "(.+?)", line (\d+), in (\S+)')


_EXTERN_OP_RE = re.compile(r"^(?:extern_kernels\.|torch\.ops\.aten\.|aten\.)?(\w+?)(?:\.default|\.\w+)?$")


@dataclass(frozen=True)
class Site:
    """One launch in a compiled module's call(), with what torch says it computes."""

    kernel: str  # triton_poi_fused_relu_3, cpp_fused_add_0, extern_kernels.convolution, ...
    handle: int
    extern: bool  # an extern call (library or ATen op), not a kernel Inductor generated
    layers: tuple[Layer, ...] = ()  # heaviest first
    sources: tuple[str, ...] = ()  # "timm/models/resnet.py:153": the innermost frame of its nodes, heaviest first
    layer_sources: tuple[str | None, ...] = ()  # the source line of each of `layers` (its heaviest node's)
    fx_nodes: tuple[str, ...] = ()
    aten_ops: tuple[str, ...] = ()
    work: Work | None = None  # of the op an extern call or a Triton template computes
    # each of `layers`' share of the site's work (its nodes' elements over all the nodes the
    # site computes); what they leave of 1 is nodes of no model module. Empty: even shares.
    shares: tuple[float, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.kernel}:{self.handle}"

    def layer_shares(self) -> tuple[float, ...]:
        """Each layer's share of the site's time: by its nodes' work, else evenly."""
        if self.shares and len(self.shares) == len(self.layers):
            return self.shares
        return tuple(1.0 / len(self.layers) for _ in self.layers) if self.layers else ()


def computes(node: str, op: str) -> bool:
    """Whether a post-grad FX node is the one an extern call of `op` computes: FX names a
    node after its op ("convolution_backward_3" for aten.convolution_backward)."""
    return node == op or (node.startswith(op + "_") and node[len(op) + 1:].isdigit())


def short_file(path: str) -> str:
    """A source file as users read it: from the package folder down ("timm/models/resnet.py")."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def innermost_frame(stack: str) -> tuple[str, int, str] | None:
    """(file, line, code) of the stack's last frame: the model code that called the op."""
    frames = []
    lines = stack.splitlines()
    for i, line in enumerate(lines):
        m = _FRAME_RE.match(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME_RE.match(lines[i + 1]) else ""
            frames.append((short_file(m.group(1)), int(m.group(2)), code))
    return frames[-1] if frames else None


def launch_sites(wrapper_source: str) -> list[tuple[str, int, tuple[str, ...], tuple[str, ...]]]:
    """The call()'s launches in order: (kernel, handle, FX nodes, ATen ops) from the
    wrapper's provenance comments (kernel sources embedded above call() carry none)."""
    out = []
    nodes: tuple[str, ...] = ()
    aten: tuple[str, ...] = ()
    for line in wrapper_source.splitlines():
        m = _SOURCE_NODES_RE.match(line)
        if m:
            nodes = tuple(s.strip() for s in m.group(1).split(",") if s.strip())
            aten = tuple(s.strip() for s in m.group(2).split(",") if s.strip())
            continue
        h = _HANDLE_RE.match(line)
        if h:
            out.append((h.group(1), int(h.group(2)), nodes, aten))
            nodes, aten = (), ()
    return out


def is_extern(kernel: str) -> bool:
    return not kernel.startswith(("triton_", "cpp_", "cpp_fused", "kernel_cpp"))


def sites_of(wrapper_source: str, stacks: Mapping[str, Sequence[str]]) -> list[Site]:
    """One compiled module's launch sites in call order, each with the layers and source
    lines of the nodes it computes (`stacks`: Inductor's kernel stack traces of this module,
    "kernel:handle" -> stack strings, one a node of the kernel's origins).

    Inductor's origins of a kernel are more than what it computes. An extern call's site
    lists the nodes fused into its inputs: only its own op's node is kept. A generated
    kernel computes what lies upstream of the values it stores (own_nodes): not the
    extern call whose input it makes (Inductor lists it), not a graph-wide constant (one
    `full` node serves every ReLU backward of the graph), not the chain behind a reduction
    whose result it only reads. The kernel's time is then shared among the modules of the
    nodes left, by the elements each node touches."""
    raw: list[tuple[str, int, tuple[str, ...], tuple[str, ...], bool, list[tuple[Tag, str]], list[str]]] = []
    for kernel, handle, nodes, aten in launch_sites(wrapper_source):
        by_node: dict[str, tuple[Tag, str]] = {}
        stored: list[str] = []
        for stack in stacks.get(f"{kernel}:{handle}") or ():
            stored += read_stores(stack)
            for tag in read_tags(stack):
                by_node.setdefault(tag.node, (tag, stack))
        raw.append((kernel, handle, nodes, aten, is_extern(kernel), list(by_node.values()), stored))
    extern_nodes = {t.node for kernel, _, _, _, extern, tagged, _ in raw if extern
                    for t, _ in tagged if computes(t.node, extern_op(kernel))}
    out = []
    for kernel, handle, nodes, aten, extern, tagged, stored in raw:
        if extern:  # the node the call computes, not those fused into its inputs
            own = [t for t in tagged if computes(t[0].node, extern_op(kernel))] or tagged
        else:
            own = own_nodes(tagged, stored, extern_nodes)
        out.append(_site(kernel, handle, extern, nodes, aten, own))
    return out


def own_nodes(tagged: list[tuple[Tag, str]], stored: Sequence[str], extern_nodes: set[str]) -> list[tuple[Tag, str]]:
    """The nodes a generated kernel computes, of those its origins list: the values it
    stores and what they are computed from among its origins (walking the tagged nodes'
    inputs), leaving out nodes an extern call computes and graph-wide constants. Without
    the stored values (a compile whose kernels were not read: kernel_stores), every origin
    but those two kinds."""
    candidates = {t.node: (t, stack) for t, stack in tagged if t.node not in extern_nodes and not t.const}
    roots = [n for n in stored if n in candidates]
    if not roots:
        return list(candidates.values())
    keep: set[str] = set()
    todo = list(roots)
    while todo:
        n = todo.pop()
        if n in keep or n not in candidates:
            continue
        keep.add(n)
        todo.extend(candidates[n][0].inputs)
    return [candidates[n] for n in candidates if n in keep]


def _site(kernel: str, handle: int, extern: bool, nodes: tuple[str, ...], aten: tuple[str, ...],
          own: list[tuple[Tag, str]]) -> Site:
    """A launch site from the nodes it computes: its layers by their share of the nodes'
    work (heaviest first), each layer's line its heaviest node's, and the site's lines by
    the work of their nodes (the first: the line that does the most of it)."""
    weights = [tag.weight for tag, _ in own]
    if own and not any(weights):  # views or untagged sizes only: the nodes share evenly
        weights = [1.0] * len(own)
    total = sum(weights)
    by_layer: dict[Layer, float] = {}
    line_of: dict[Layer, tuple[float, str | None]] = {}
    lines: dict[str, float] = {}
    ops: dict[str, float] = {}
    for (tag, stack), w in zip(own, weights):
        frame = innermost_frame(stack)
        line = f"{frame[0]}:{frame[1]}" if frame else None
        if line:
            lines[line] = lines.get(line, 0.0) + w
        if tag.op:
            ops[f"aten.{tag.op}"] = ops.get(f"aten.{tag.op}", 0.0) + w
        if tag.layer is None:
            continue
        by_layer[tag.layer] = by_layer.get(tag.layer, 0.0) + w
        if tag.layer not in line_of or (w > line_of[tag.layer][0] and line):
            line_of[tag.layer] = (w, line or line_of.get(tag.layer, (0.0, None))[1])
    # a module whose nodes here are only views (weight 0) does none of the kernel's work: not
    # named beside those that do (it showed in kernel labels at 0 ms)
    layers = sorted((la for la in by_layer if by_layer[la] > 0 or not total), key=lambda la: -by_layer[la])
    return Site(kernel, handle, extern, layers=tuple(layers),
                sources=tuple(sorted(lines, key=lambda ln: -lines[ln])),
                layer_sources=tuple(line_of[la][1] for la in layers), fx_nodes=nodes,
                aten_ops=aten or tuple(sorted(ops, key=lambda o: -ops[o])),
                work=_site_work(own) if extern or kernel.startswith(TEMPLATE_PREFIX) else None,
                shares=tuple(by_layer[la] / total for la in layers) if total else ())


# A Triton template (max-autotune's matmul or convolution) computes its op; another generated
# kernel lists the matmul whose input or output it fuses (a convolution's bias gradient)
# without computing it, so only these and extern calls take their nodes' work.
TEMPLATE_PREFIX = "triton_tem_"


def _site_work(own: list[tuple[Tag, str]]) -> Work | None:
    """The work of a launch site's nodes, each node once: an extern call's own op, a
    template's matmul."""
    works = {tag.node: tag.work for tag, _ in own if tag.work is not None}
    if not works:
        return None
    nbytes = [w.bytes for w in works.values()]
    dtypes = {w.dtype for w in works.values() if w.dtype}
    return Work(sum(w.flops for w in works.values()), None if None in nbytes else sum(b or 0.0 for b in nbytes),
                dtypes.pop() if len(dtypes) == 1 else None)


def extern_op(kernel: str) -> str:
    """The ATen op of an extern call: extern_kernels.convolution -> convolution,
    torch.ops.aten.convolution_backward.default -> convolution_backward."""
    m = _EXTERN_OP_RE.match(kernel)
    return m.group(1) if m else kernel


def fit_path(path: str, known: set[str]) -> str:
    """A tagged path as the model's own named_modules() spells it: dynamo names a module
    from whatever the compiled function reached it through ("model.layer4.0" from a
    closure's `model`), so leading parts are dropped until the path is one of the model's."""
    parts = path.split(".") if path else []
    for i in range(len(parts) + 1):
        candidate = ".".join(parts[i:])
        if candidate in known:
            return candidate
    return path


def with_known_paths(sites: Sequence[Site], known: set[str] | None) -> list[Site]:
    """`sites` with each layer's path fitted to the model's (fit_path); as they are
    without `known`."""
    if not known:
        return list(sites)
    from dataclasses import replace

    return [replace(s, layers=tuple(Layer(fit_path(la.path, known), la.cls, la.pass_) for la in s.layers))
            for s in sites]
