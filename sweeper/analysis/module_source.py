"""Read an Inductor compiled module (wrapper code) as text (pure).

A compiled module's role is visible in its own source, which holds on FX-graph-cache hits
too (no "Compiled module path:" line is printed then): AOTAutograd names the inputs of a
training forward ``primals_N``, of its backward ``primals_N``/``tangents_N`` plus saved
activations, and of an inference graph ``argN_1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FORWARD, BACKWARD, INFERENCE = "forward", "backward", "inference"

_UNPACK_RE = re.compile(r"^\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*,?\s*=\s*args\s*$", re.M)
_KERNEL_DEF_RE = re.compile(
    r"^([A-Za-z_]\w*) = async_compile\.(triton|cpp_pybinding|cpp|cuda|rocm|mps|cutlass)\(", re.M
)
_KERNEL_PATH_RE = re.compile(r"^# kernel path: (.+\.py)\s*$")


@dataclass
class ModuleInfo:
    role: str
    kernels: dict[str, str | None] = field(default_factory=dict)  # name -> kernel file path
    has_get_args: bool = False
    has_call: bool = False


def module_role(source: str) -> str:
    """forward, backward or inference, from the names `call` unpacks its args into."""
    # The last unpack is the wrapper's own call(): kernel sources embedded above it carry
    # benchmark harnesses with call() functions of their own.
    found = _UNPACK_RE.findall(source)
    names = found[-1] if found else ""
    if "tangents_" in names:
        return BACKWARD
    if "primals_" in names:
        return FORWARD
    return INFERENCE


def kernel_definitions(source: str) -> dict[str, str | None]:
    """Kernel name -> the `# kernel path:` file above its definition (None for inline C++)."""
    kernels: dict[str, str | None] = {}
    last_path = None
    for line in source.splitlines():
        pm = _KERNEL_PATH_RE.match(line)
        if pm:
            last_path = pm.group(1)
            continue
        km = _KERNEL_DEF_RE.match(line)
        if km:
            kernels[km.group(1)] = last_path
            last_path = None
    return kernels


def parse_module(source: str) -> ModuleInfo:
    return ModuleInfo(
        role=module_role(source),
        kernels=kernel_definitions(source),
        has_get_args=bool(re.search(r"^def get_args\(\)", source, re.M)),
        has_call=bool(re.search(r"^(call = |def call\()", source, re.M)),
    )


def is_compiled_module(source: str) -> bool:
    """Wrapper code, not a kernel file (kernel files define a call() harness too)."""
    return "async_compile = AsyncCompile()" in source and parse_module(source).has_call


def kernel_sources(source: str) -> dict[str, str]:
    """Triton kernel name -> its source as the wrapper module carries it inline
    (`name = async_compile.triton('name', '''<source>''', ...)`), read as Python reads it.
    Inductor writes a kernel's file from this very string (its name is the string's hash),
    so it stands in for a `# kernel path:` file that is not on this machine: a compile
    loaded from the compile store keeps the paths of the run that compiled it."""
    import ast

    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        call = node.value if isinstance(node, ast.Assign) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "triton" \
                and len(call.args) >= 2:
            name, text = call.args[0], call.args[1]
            if isinstance(name, ast.Constant) and isinstance(name.value, str) \
                    and isinstance(text, ast.Constant) and isinstance(text.value, str):
                out[name.value] = text.value
    return out
