"""From a kernel to the model's code: which module (layer) and source line each profiled
kernel's time comes from (pure: no torch).

What torch says, and how it gets here:

* The job (tasks/provenance.py) turns on Inductor's provenance tracking and tags every
  post-grad FX node's stack trace with the model module it comes from (its
  ``nn_module_stack``; for a backward node the forward module it differentiates,
  ``fwd_nn_module_stack``): one line ``[sweeper module] <pass> <path> <Class>``. Inductor
  keeps each launch site's stack traces in the compiled graph and hands them out again on
  an FX-graph-cache hit and a compile-store load, so a warm job carries the same
  attribution as a cold one.
* A compiled module's wrapper code names each launch, in call order, with a comment
  ``# [Provenance debug handles] <kernel>:<handle>`` (launch_sites). Triton and C++ kernels
  are found in a trace by their unique names; a library kernel (cuDNN, cuBLAS, oneDNN)
  launched by an extern call (``extern_kernels.convolution``, ``aten.convolution_backward``)
  has a vendor name, and is placed by the order of launches: it belongs to an extern call
  between the compiled kernels that ran just before and just after it (attribute_events).

What cannot be placed is counted by reason, never guessed from a name alone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from sweeper.analysis.categories import categorize
from sweeper.analysis.trace import Interval

TAG = "[sweeper module]"
FORWARD, BACKWARD = "forward", "backward"

# How a kernel's time was placed, most direct first (the record keeps the ms of each).
BY_NAME = "provenance (kernel name)"  # a Triton or C++ kernel: its launch site by its unique name
BY_ORDER = "provenance (extern call, launch order)"  # a library kernel: the one extern call between its neighbours
BY_ORDER_SHARED = "provenance (extern calls, launch order, split)"  # between several compatible extern calls

# Why a kernel's time was not placed.
OUTSIDE = "outside compiled graphs"  # eager code between graphs (the loss, autograd's seed)
NO_SITE = "inside a compiled graph, no extern call to place it"  # e.g. a memset between two Triton kernels
NO_MODULE = "launch site with no model module"  # e.g. the copy of parameters into a new layout

_HANDLE_RE = re.compile(r"^\s*# \[Provenance debug handles\] (\S+):(\d+)\s*$")
_SOURCE_NODES_RE = re.compile(r"^\s*# Topologically Sorted Source Nodes: \[(.*?)\], Original ATen: \[(.*?)\]\s*$")
_FRAME_RE = re.compile(r'^\s*File "(.+?)", line (\d+), in (\S+)')
_CPP_EVENT_RE = re.compile(r"^graph_\d+_")
_PREFIX_RE = re.compile(r"""^[LG]\[['"][^'"]*['"]\]""")
_INDEX_RE = re.compile(r"""(?:\._modules)?\[['"]?([^'"\]]+)['"]?\]""")
_EXTERN_OP_RE = re.compile(r"^(?:extern_kernels\.|torch\.ops\.aten\.|aten\.)?(\w+?)(?:\.default|\.\w+)?$")
# library kernel names by the kind of extern call that launches them (on a GPU)
_CONV_NAME_RE = re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit|cudnn", re.IGNORECASE)
_GEMM_NAME_RE = re.compile(r"gemm|gemv|cublas|nvjet|matmul", re.IGNORECASE)


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


@dataclass
class Placed:
    """Per-run time of the attributed kernels, and what was not attributed."""

    runs: int
    # (layer path, class, pass, category) -> [ms, launches], per run
    by_layer: dict[tuple[str, str, str, str], list[float]] = field(default_factory=dict)
    layer_source: dict[tuple[str, str], str] = field(default_factory=dict)  # (path, pass) -> its source line
    # kernel name -> layer label -> ms per run (for the kernel tables' columns)
    by_kernel: dict[str, dict[str, float]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # kernel name -> its costliest site's source line
    aten: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kernel name -> its first site's ATen ops
    kernel_how: dict[str, str] = field(default_factory=dict)  # kernel name -> how it was first placed
    how: dict[str, float] = field(default_factory=dict)  # method -> ms per run
    unattributed: dict[str, float] = field(default_factory=dict)  # reason -> ms per run
    device_ms: float = 0.0
    # per event, in the order given: (layers, source) or (reason, None) where unplaced
    events: list[tuple[str, str | None]] = field(default_factory=list)
    # per event, in the order given: the launch sites it was placed on, with its share of
    # each (none where unplaced); and the factor model_code() scaled its times by
    event_sites: list[tuple[tuple[Site, float], ...]] = field(default_factory=list)
    scale: float = 1.0


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


def event_kernel_name(name: str) -> str:
    """A trace event's name as the wrapper names the kernel: C++ kernels are profiled as
    graph_<N>_cpp_fused_..."""
    return _CPP_EVENT_RE.sub("", name)


def extern_op(kernel: str) -> str:
    """The ATen op of an extern call: extern_kernels.convolution -> convolution,
    torch.ops.aten.convolution_backward.default -> convolution_backward."""
    m = _EXTERN_OP_RE.match(kernel)
    return m.group(1) if m else kernel


def _is_mm(op: str) -> bool:
    return "mm" in op or "linear" in op or "matmul" in op


def compatible(event: Interval, site: Site) -> bool:
    """Whether a library or ATen event can come from this extern call: on a CPU the op's
    own name ("aten::convolution_backward"); on a GPU the vendor kernel's kind: a cuDNN
    dgrad kernel is a convolution's; a GEMM an mm's or a convolution's (cuDNN runs a 1x1
    convolution as a GEMM: nvjet and cuBLASLt kernels under mixnet_l's pointwise
    convolutions on an H100); any other kernel (a layout transform, an ATen elementwise
    kernel) any extern call's."""
    op = extern_op(site.kernel)
    if event.cat == "cpu_op":
        return event.name.split("::")[-1] == op
    if _CONV_NAME_RE.search(event.name):
        return "conv" in op
    if _GEMM_NAME_RE.search(event.name):
        return _is_mm(op) or "conv" in op
    return True


def _fitting(event: Interval, gap: list[Site]) -> list[Site]:
    """The extern calls of a gap that can launch `event`; a GEMM goes to an mm call where
    the gap has one, rather than to a convolution beside it."""
    fits = [s for s in gap if compatible(event, s)]
    if event.cat != "cpu_op" and _GEMM_NAME_RE.search(event.name) and not _CONV_NAME_RE.search(event.name):
        mm = [s for s in fits if _is_mm(extern_op(s.kernel))]
        return mm or fits
    return fits


def attribute_events(events: Sequence[Interval], modules: Sequence[Sequence[Site]], runs: int) -> Placed:
    """Place each profiled kernel (`events`, in start order, of `runs` profiled calls) on
    the launch sites of the compiled modules (`modules`, each its sites in call order).

    A Triton or C++ kernel is found by name; where one kernel is launched from several
    sites (Inductor reuses a kernel whose code is identical, so each launch does the same
    work), the site that continues the sequence of the kernel before it is taken, else
    the sites in turn. Every other kernel lies between two placed neighbours and goes to
    the extern calls between their sites that can launch it."""
    named: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for m, sites in enumerate(modules):
        for p, site in enumerate(sites):
            if not site.extern:
                named[site.kernel].append((m, p))
    # first pass: the kernels Inductor named
    anchors: list[tuple[int, int] | None] = []
    turn: dict[str, int] = defaultdict(int)
    last: tuple[int, int] | None = None
    for e in events:
        cands = named.get(event_kernel_name(e.name))
        if not cands:
            anchors.append(None)
            continue
        pick = next((c for c in cands if last is not None and c[0] == last[0] and c[1] > last[1]), None)
        if pick is None or len(cands) == 1:
            pick = cands[turn[e.name] % len(cands)]
        turn[e.name] += 1
        anchors.append(pick)
        last = pick
    placed = Placed(runs=runs)
    prev: list[tuple[int, int] | None] = []
    cur = None
    for a in anchors:
        cur = a if a is not None else cur
        prev.append(cur)
    nxt: list[tuple[int, int] | None] = [None] * len(anchors)
    cur = None
    for i in range(len(anchors) - 1, -1, -1):
        cur = anchors[i] if anchors[i] is not None else cur
        nxt[i] = cur
    for e, a, before, after in zip(events, anchors, prev, nxt):
        ms = e.dur_us / 1000 / runs
        placed.device_ms += ms
        if a is not None:
            _add(placed, e, [(modules[a[0]][a[1]], 1.0)], BY_NAME, ms)
            continue
        gap = _extern_between(modules, before, after)
        fits = _fitting(e, gap)
        if not fits:
            reason = OUTSIDE if _between_graphs(modules, before, after) else NO_SITE
            placed.unattributed[reason] = placed.unattributed.get(reason, 0.0) + ms
            placed.events.append((f"not placed: {reason}", None))
            placed.event_sites.append(())
            continue
        share = 1.0 / len(fits)
        _add(placed, e, [(s, share) for s in fits], BY_ORDER if len(fits) == 1 else BY_ORDER_SHARED, ms)
    return placed


def _extern_between(modules: Sequence[Sequence[Site]], before: tuple[int, int] | None,
                    after: tuple[int, int] | None) -> list[Site]:
    """The extern calls that can run between two placed kernels: after `before` in its
    module up to its next generated kernel, and before `after` in its module back to the
    generated kernel before it."""
    out: list[Site] = []
    if before is not None:
        for s in modules[before[0]][before[1] + 1:]:
            if not s.extern:
                break
            out.append(s)
    if after is not None and (before is None or after[0] != before[0]):
        lead: list[Site] = []
        for s in reversed(modules[after[0]][:after[1]]):
            if not s.extern:
                break
            lead.append(s)
        out.extend(reversed(lead))
    return out


def _between_graphs(modules: Sequence[Sequence[Site]], before, after) -> bool:
    """Whether nothing of a compiled module is left between two placed kernels: the one
    before ends its module's generated kernels and the one after starts its own."""
    def last_generated(m: int) -> int:
        return max((p for p, s in enumerate(modules[m]) if not s.extern), default=-1)

    def first_generated(m: int) -> int:
        return min((p for p, s in enumerate(modules[m]) if not s.extern), default=-1)

    ends = before is None or before[1] == last_generated(before[0])
    starts = after is None or after[1] == first_generated(after[0])
    return ends and starts and (before is None or after is None or before[0] != after[0])


def _add(placed: Placed, e: Interval, sites: list[tuple[Site, float]], how: str, ms: float) -> None:
    category = categorize(e.name, e.cat)
    kernels = placed.by_kernel.setdefault(e.name, {})
    for site, weight in sites:
        if not site.layers:
            placed.unattributed[NO_MODULE] = placed.unattributed.get(NO_MODULE, 0.0) + ms * weight
            continue
        placed.how[how] = placed.how.get(how, 0.0) + ms * weight
        each = ms * weight / len(site.layers)  # a kernel that fuses several layers: its time split evenly
        for layer, line in zip(site.layers, site.layer_sources or (None,) * len(site.layers)):
            if line and (layer.path, layer.pass_) not in placed.layer_source:
                placed.layer_source[(layer.path, layer.pass_)] = line
            row = placed.by_layer.setdefault((layer.path, layer.cls, layer.pass_, category), [0.0, 0.0])
            row[0] += each
            row[1] += weight / placed.runs / len(site.layers)
            kernels[layer.label()] = kernels.get(layer.label(), 0.0) + each
        if site.sources and e.name not in placed.sources:
            placed.sources[e.name] = site.sources[0]
        if site.aten_ops and e.name not in placed.aten:
            placed.aten[e.name] = site.aten_ops
        placed.kernel_how.setdefault(e.name, how)
    layers = [layer.label() for site, _ in sites for layer in site.layers]
    source = next((site.sources[0] for site, _ in sites if site.sources), None)
    placed.events.append(("; ".join(layers) if layers else f"not placed: {NO_MODULE}", source))
    placed.event_sites.append(tuple(sites))


def summary(placed: Placed) -> dict:
    """The record's `model_code` part for one profile: the rows by layer and category, how
    much was placed and how, what was not and why (ms per run)."""
    attributed = sum(placed.how.values())
    rows = [{"module": path, "class": cls, "pass": pass_, "category": cat,
             "device_ms": round(ms, 6), "launches": round(n, 3), "source": placed.layer_source.get((path, pass_))}
            for (path, cls, pass_, cat), (ms, n) in sorted(placed.by_layer.items(), key=lambda kv: -kv[1][0])]
    return {
        "device_ms": placed.device_ms,
        "attributed_ms": attributed,
        "attributed_pct": attributed / placed.device_ms * 100 if placed.device_ms else None,
        "how": {k: round(v, 6) for k, v in placed.how.items()},
        "unattributed": {k: round(v, 6) for k, v in placed.unattributed.items()},
        "rows": rows,
    }


def kernel_columns(placed: Placed, kernel_rows: Iterable[dict], top: int = 3) -> None:
    """The kernel table's model columns, in place: `model_modules` (the layers a kernel's
    time goes to, costliest first, at most `top`, with how many more), `model_source`,
    `model_aten` (the ATen ops its launch site computes, as the compiled module's comment
    says) and `model_how` (how it was placed)."""
    for row in kernel_rows:
        layers = placed.by_kernel.get(row["name"])
        row["model_aten"] = list(placed.aten[row["name"]]) if row["name"] in placed.aten else None
        row["model_how"] = placed.kernel_how.get(row["name"])
        if not layers:
            row["model_modules"], row["model_source"] = None, None
            continue
        ranked = sorted(layers.items(), key=lambda kv: -kv[1])
        names = [label for label, _ in ranked[:top]]
        if len(ranked) > top:
            names.append(f"+{len(ranked) - top} more")
        row["model_modules"] = names
        row["model_source"] = placed.sources.get(row["name"])


def modules_said(model_modules: object, shown: int = 2) -> str | None:
    """A kernel's model modules as tables keep them ("a; b; c; +47 more", kernel_columns)
    said in a line: the first `shown` and how many more; None where there are none."""
    if not isinstance(model_modules, str) or not model_modules:
        return None
    names = model_modules.split("; ")
    more = int(names.pop()[1:].split()[0]) if names[-1].startswith("+") else 0
    rest = max(len(names) - shown, 0) + more
    return "; ".join(names[:shown]) + (f" and {rest} more" if rest > 0 else "")


def block_of(path: object, depth: int | None) -> str:
    """The block of `depth` components that holds a module ("features.denseblock3.
    denselayer12.conv2" at depth 2 is "features.denseblock3"); depth None: the path
    itself; "(model)" for the model's own code."""
    parts = str(path).split(".") if path else []
    return ".".join(parts if depth is None else parts[:depth]) or "(model)"


def rollup(rows: Iterable[Mapping], depth: int | None = None) -> dict[tuple[str, str], float]:
    """(block_of the module at `depth`, pass) -> ms: a layer's time counted in each block
    that holds it."""
    out: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        out[(block_of(r["module"], depth), r["pass"])] += r["device_ms"]
    return dict(out)


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


def model_code(kernels: Sequence[Interval], modules: Sequence[Sequence[Site]], breakdown: dict) -> tuple[dict, Placed]:
    """One profile's attribution, in the breakdown's own terms: the breakdown's kernel
    rows gain their model columns in place (kernel_columns), and the returned summary's
    times are scaled to the breakdown's device time (a CPU breakdown scales its profiled
    times to the unprofiled run: breakdown.to_unprofiled). Returns the summary and the
    placement (its `events` label each kernel of `kernels`)."""
    placed = attribute_events(kernels, modules, breakdown["runs"])
    scale = breakdown["device_ms"] / placed.device_ms if placed.device_ms else 1.0
    if scale != 1.0:
        for row in placed.by_layer.values():
            row[0] *= scale
        for layers in placed.by_kernel.values():
            for label in layers:
                layers[label] *= scale
        placed.how = {k: v * scale for k, v in placed.how.items()}
        placed.unattributed = {k: v * scale for k, v in placed.unattributed.items()}
        placed.device_ms *= scale
        placed.scale = scale
    kernel_columns(placed, breakdown.get("kernels") or [])
    out = summary(placed)
    out["sites"] = sum(len(s) for s in modules)
    out["sites_with_module"] = sum(1 for sites in modules for s in sites if s.layers)
    return out, placed
