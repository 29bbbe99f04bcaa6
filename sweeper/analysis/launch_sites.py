"""A compiled module's launch sites and the model code each computes (pure: no torch): the
tag line the job's post-grad pass writes into each FX node's stack trace ("[sweeper
module] <pass> <path> <Class>", with its work), read back; each launch in a compiled
module's wrapper code, in call order, with its kernel, provenance handle and source nodes;
and the two joined into Sites, the unit sweeper/analysis/attribution.py places a trace's
kernels on."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

FORWARD, BACKWARD = "forward", "backward"

TAG = "[sweeper module]"


_HANDLE_RE = re.compile(r"^\s*# \[Provenance debug handles\] (\S+):(\d+)\s*$")


_SOURCE_NODES_RE = re.compile(r"^\s*# Topologically Sorted Source Nodes: \[(.*?)\], Original ATen: \[(.*?)\]\s*$")


_FRAME_RE = re.compile(r'^\s*File "(.+?)", line (\d+), in (\S+)')


_PREFIX_RE = re.compile(r"""^[LG]\[['"][^'"]*['"]\]""")


_INDEX_RE = re.compile(r"""(?:\._modules)?\[['"]?([^'"\]]+)['"]?\]""")


_EXTERN_OP_RE = re.compile(r"^(?:extern_kernels\.|torch\.ops\.aten\.|aten\.)?(\w+?)(?:\.default|\.\w+)?$")


@dataclass(frozen=True)
class Layer:
    """One model module a kernel's code comes from."""

    path: str  # as named_modules() spells it: "layer4.0.conv2"; "" for the model itself
    cls: str  # "Conv2d"
    pass_: str  # forward | backward (the forward module a backward kernel differentiates)

    def label(self) -> str:
        return f"{self.path or '(model)'} ({self.cls}, {self.pass_})"


@dataclass(frozen=True)
class Work:
    """What one launch computes: FLOPs by PyTorch's formulas for the op, the bytes its
    tensors span, the dtype of its inputs (tasks/node_work.py)."""

    flops: float
    bytes: float | None
    dtype: str | None

    def token(self) -> str:
        return f"work={self.flops:.0f}/{'' if self.bytes is None else f'{self.bytes:.0f}'}/{self.dtype or ''}"

    @staticmethod
    def read(token: str) -> "Work | None":
        try:
            flops, nbytes, dtype = token.removeprefix("work=").split("/")
            return Work(float(flops), float(nbytes) if nbytes else None, dtype or None)
        except ValueError:
            return None


@dataclass(frozen=True)
class Site:
    """One launch in a compiled module's call(), with what torch says it computes."""

    kernel: str  # triton_poi_fused_relu_3, cpp_fused_add_0, extern_kernels.convolution, ...
    handle: int
    extern: bool  # an extern call (library or ATen op), not a kernel Inductor generated
    layers: tuple[Layer, ...] = ()
    sources: tuple[str, ...] = ()  # "timm/models/resnet.py:153": each stack's innermost frame
    layer_sources: tuple[str | None, ...] = ()  # the source line of each of `layers`
    fx_nodes: tuple[str, ...] = ()
    aten_ops: tuple[str, ...] = ()
    work: Work | None = None  # of the op an extern call or a Triton template computes

    @property
    def key(self) -> str:
        return f"{self.kernel}:{self.handle}"


def normalize_path(dynamo_path: str) -> str:
    """Dynamo's spelling of a module ("L['self'].layer4[0].bn2", "G['model'].fc") as
    named_modules() spells it below the root ("layer4.0.bn2", "fc")."""
    path = _PREFIX_RE.sub("", dynamo_path.strip())
    path = _INDEX_RE.sub(lambda m: "." + m.group(1), path)
    return path.strip(".")


def tag_line(pass_: str, dynamo_path: str, cls: str, node: str, work: Work | None = None) -> str:
    """The line tasks/provenance.py appends to a post-grad node's stack trace: the node's
    pass, module and class, and its own name (an extern call's site lists the nodes fused
    into its inputs too; the node named like its op is the one it computes); then, for an
    op with a FLOP formula, its work."""
    extra = f" {work.token()}" if work is not None else ""
    return f"  {TAG} {pass_} {normalize_path(dynamo_path) or '.'} {cls} {node}{extra}\n"


def read_tags(stack: str) -> list[tuple[Layer, str, Work | None]]:
    """The (layer, FX node, work) tagged in one stack trace (read_tags(x + tag_line(...))
    gives them back); tags written before work was tagged read with None."""
    out = []
    for line in stack.splitlines():
        line = line.strip()
        if line.startswith(TAG):
            parts = line[len(TAG):].split()
            if len(parts) in (4, 5):
                pass_, path, cls, node = parts[:4]
                work = Work.read(parts[4]) if len(parts) == 5 else None
                out.append((Layer("" if path == "." else path, cls, pass_), node, work))
    return out


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
    lines its stack traces give (`stacks`: Inductor's kernel stack traces of this module,
    "kernel:handle" -> stack strings)."""
    out = []
    for kernel, handle, nodes, aten in launch_sites(wrapper_source):
        extern = is_extern(kernel)
        tagged = [(layer, node, stack, work) for stack in stacks.get(f"{kernel}:{handle}") or ()
                  for layer, node, work in read_tags(stack)]
        if extern:  # the node the call computes, not those fused into its inputs
            own = [t for t in tagged if computes(t[1], extern_op(kernel))]
            tagged = own or tagged
        layers: dict[Layer, str | None] = {}
        sources: dict[str, None] = {}
        for layer, _, stack, _ in tagged:
            frame = innermost_frame(stack)
            line = f"{frame[0]}:{frame[1]}" if frame else None
            if line:
                sources.setdefault(line, None)
            if layers.get(layer) is None:
                layers[layer] = line
        out.append(Site(kernel, handle, extern, layers=tuple(layers), sources=tuple(sources), fx_nodes=nodes,
                        aten_ops=aten, layer_sources=tuple(layers.values()),
                        work=_site_work(tagged) if extern or kernel.startswith(TEMPLATE_PREFIX) else None))
    return out


# A Triton template (max-autotune's matmul or convolution) computes its op; another generated
# kernel lists the matmul whose input or output it fuses (a convolution's bias gradient)
# without computing it, so only these and extern calls take their nodes' work.
TEMPLATE_PREFIX = "triton_tem_"


def _site_work(tagged: list) -> Work | None:
    """The work of a launch site's tagged nodes, each node once (a node's stack trace may
    be listed under several kernels): an extern call's own op, a template's matmul."""
    works = {node: work for _, node, _, work in tagged if work is not None}
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
