"""The tag line the job's post-grad pass writes into each FX node's stack trace (pure: no
torch): "[sweeper module] <pass> <path> <Class> <node>" with the elements the node touches,
its op, its inputs and its work (tasks/provenance.py writes it), and the line of the values
a generated kernel stores (sweeper/torch_internals/kernel_stores.py); each read back here
for sweeper/analysis/launch_sites.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sweeper.analysis.op_costs import cost


FORWARD, BACKWARD = "forward", "backward"


TAG = "[sweeper module]"


# a generated kernel's stored values (sweeper/torch_internals/kernel_stores.py)
STORES = "[sweeper stores]"


_PREFIX_RE = re.compile(r"""^[LG]\[['"][^'"]*['"]\]""")


_INDEX_RE = re.compile(r"""(?:\._modules)?\[['"]?([^'"\]]+)['"]?\]""")


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
class Tag:
    """One post-grad FX node as the tag pass described it (tasks/provenance.py)."""

    layer: Layer | None  # None: a node of no model module (the loss, a layout copy)
    node: str
    work: Work | None = None
    elems: float | None = None  # the elements it touches at most (tasks/node_work.node_elements)
    const: bool = False  # reads no tensor: a graph-wide constant (full, scalar_tensor, iota)
    view: bool = False  # only re-indexes a tensor
    op: str | None = None  # its ATen op: "native_batch_norm_backward"
    inputs: tuple[str, ...] = ()  # the FX nodes it reads

    @property
    def weight(self) -> float:
        """Its share of a fused kernel's work: the elements it touches times what an element
        of its op costs (sweeper/analysis/op_costs.py); none for a view or a constant (a tag
        written before elements were tagged counts 1)."""
        if self.const or self.view:
            return 0.0
        return (float(self.elems) if self.elems is not None else 1.0) * cost(self.op)


def normalize_path(dynamo_path: str) -> str:
    """Dynamo's spelling of a module ("L['self'].layer4[0].bn2", "G['model'].fc") as
    named_modules() spells it below the root ("layer4.0.bn2", "fc")."""
    path = _PREFIX_RE.sub("", dynamo_path.strip())
    path = _INDEX_RE.sub(lambda m: "." + m.group(1), path)
    return path.strip(".")


def tag_line(pass_: str, dynamo_path: str | None, cls: str | None, node: str, work: Work | None = None,
             elems: int | None = None, const: bool = False, view: bool = False, op: str | None = None,
             inputs: tuple[str, ...] = ()) -> str:
    """The line tasks/provenance.py appends to a post-grad node's stack trace: the node's
    pass, module and class ("-" for a node of no module), its own name (an extern call's
    site lists the nodes fused into its inputs too; the node named like its op is the one it
    computes), the elements it touches, whether it is a constant or a view, its op, the
    nodes it reads, and for an op with a FLOP formula its work."""
    path = "-" if dynamo_path is None else (normalize_path(dynamo_path) or ".")
    extra = "".join([f" el={elems}" if elems is not None else "", " const" if const else "", " view" if view else "",
                     f" op={op}" if op else "", f" in={','.join(inputs)}" if inputs else "",
                     f" {work.token()}" if work is not None else ""])
    return f"  {TAG} {pass_} {path} {cls or '-'} {node}{extra}\n"


def read_tags(stack: str) -> list[Tag]:
    """The nodes tagged in one stack trace (read_tags(x + tag_line(...)) gives them back);
    tags written before elements, flags or work were tagged read without them."""
    out = []
    for line in stack.splitlines():
        line = line.strip()
        if TAG not in line:
            continue
        # records written before the tag started a line of its own carry it after the text
        # of autograd's "Gradient addition node" trace
        parts = line[line.index(TAG) + len(TAG):].split()
        if len(parts) < 4:
            continue
        pass_, path, cls, node = parts[:4]
        fields: dict = {}
        for token in parts[4:]:
            if token.startswith("work="):
                fields["work"] = Work.read(token)
            elif token.startswith("el="):
                try:
                    fields["elems"] = float(token[3:])
                except ValueError:
                    pass
            elif token.startswith("op="):
                fields["op"] = token[3:]
            elif token.startswith("in="):
                fields["inputs"] = tuple(n for n in token[3:].split(",") if n)
            elif token in ("const", "view"):
                fields[token] = True
        layer = None if path == "-" else Layer("" if path == "." else path, cls, pass_)
        out.append(Tag(layer, node, **fields))
    return out


def read_stores(stack: str) -> list[str]:
    """The node names of `[sweeper stores]` lines in one stack-trace string."""
    out = []
    for line in stack.splitlines():
        line = line.strip()
        if line.startswith(STORES):
            out.extend(line[len(STORES):].split())
    return out
