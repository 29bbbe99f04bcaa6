"""Capture every compiled module (wrapper code) Inductor produces in this process.

Inductor emits a structured-trace event ``inductor_output_code`` with the module's file
for a fresh compile *and* for an FX-graph-cache hit (codecache.py), whereas the
"Compiled module path:" log line only appears for fresh compiles. A logging handler on
the structured-trace logger sees both, without TORCH_TRACE writing files.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from sweeper.analysis.module_source import parse_module
from sweeper.torch_internals.probes import compiled_graph_class

_TRACE_LOGGER = "torch.__trace"


@dataclass
class CapturedModule:
    path: str  # where Inductor wrote it (inside the job's cache folder)
    role: str  # forward | backward | inference
    graph_id: int  # order of compilation among the job's modules
    frame_id: int | None
    frame_compile_id: int | None
    cache_hit: bool | None = None
    # Inductor's kernel stack traces ("kernel:handle" -> stacks, module tags included:
    # tasks/provenance.py); None where torch logged none for this module
    stack_traces: dict[str, list[str]] | None = None

    def label(self) -> str:
        return f"{self.role}_{self.graph_id}"


class ModuleCapture(logging.Handler):
    """Use as a context manager around the first (compiling) calls of the step."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.modules: list[CapturedModule] = []
        self.graph_breaks: list[str] = []  # dynamo's graph-break reports, as it logged them
        self._seen: set[str] = set()
        self._last: CapturedModule | None = None  # the module whose artifacts follow its code
        self._logger = logging.getLogger(_TRACE_LOGGER)
        self._old_level = self._logger.level

    def emit(self, record: logging.LogRecord) -> None:
        metadata = getattr(record, "metadata", None)
        if not isinstance(metadata, dict):
            return
        artifact = metadata.get("artifact")
        if isinstance(artifact, dict):
            self._artifact(artifact.get("name"), getattr(record, "payload", None))
            return
        out = metadata.get("inductor_output_code")
        if not isinstance(out, dict) or not out.get("filename"):
            return
        path = str(Path(out.get("file_path") or out["filename"]).resolve())
        self._last = None
        if path in self._seen:
            return
        self._seen.add(path)
        try:
            role = parse_module(Path(path).read_text()).role
        except OSError:
            role = "unknown"
        self.modules.append(
            CapturedModule(
                path=path,
                role=role,
                graph_id=len(self.modules),
                frame_id=metadata.get("frame_id"),
                frame_compile_id=metadata.get("frame_compile_id"),
            )
        )
        self._last = self.modules[-1]

    def _artifact(self, name: object, payload: object) -> None:
        """Inductor logs a module's kernel stack traces just after its code (a fresh compile
        and a cache hit alike); dynamo logs each graph break as it happens."""
        if name == "dynamo_graph_break_reason" and isinstance(payload, str):
            self.graph_breaks.append(payload)
        elif name == "inductor_provenance_tracking_kernel_stack_traces" and self._last is not None:
            if self._last.stack_traces is None and isinstance(payload, str):
                try:
                    got = json.loads(payload)
                except ValueError:
                    return
                if isinstance(got, dict):
                    self._last.stack_traces = {k: v for k, v in got.items() if isinstance(v, list)}

    def __enter__(self) -> "ModuleCapture":
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._old_level)


def loaded_module(path: str):
    """The module object this process already loaded for `path`, kernels and all, so that
    profiling it costs no second load (the `-p` harness reloads and re-tunes every kernel in
    a fresh process: 64 s for mixnet_l's forward by hand)."""
    from sweeper.torch_internals.compile_cache import load_code_module
    from sweeper.torch_internals.probes import loaded_code_modules

    modules, modules_by_path = loaded_code_modules()
    for mod in reversed(modules):
        if str(Path(getattr(mod, "__file__", "") or "").resolve()) == path:
            return mod
    mod = modules_by_path.get(path)
    if mod is not None:
        return mod
    # Not loaded here (should not happen after a compile in this process): load it.
    return load_code_module(path)


def copy_modules(modules: list[CapturedModule], dest: Path) -> dict[str, str]:
    """Copy each module's source into the job folder as <role>_<graph>.py (artifacts that
    outlive the cache folder and can be run by hand with `python <file> -p`)."""
    dest.mkdir(parents=True, exist_ok=True)
    out = {}
    for m in modules:
        target = dest / f"{m.label()}.py"
        shutil.copyfile(m.path, target)
        out[m.label()] = str(target)
    return out


def _module_file_of(compiled_graph, sources: dict[str, str]) -> str | None:
    """The wrapper-code file behind an Inductor CompiledFxGraph object, or None.

    Inductor may wrap the module's `call` (input alignment, CUDA graphs), and a wrapper's
    __globals__ name a torch file, so only a file among the captured modules counts: look
    through __wrapped__, bound methods and closures for it, then match the source text."""
    known = set(sources.values())
    todo, seen = [getattr(compiled_graph, "current_callable", None)], set[int]()
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen or len(seen) > 64:
            continue
        seen.add(id(fn))
        fn = getattr(fn, "__func__", fn)
        path = getattr(fn, "__globals__", {}).get("__file__")
        if path and str(Path(path).resolve()) in known:
            return str(Path(path).resolve())
        todo.append(getattr(fn, "__wrapped__", None))
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                if callable(cell.cell_contents):
                    todo.append(cell.cell_contents)
            except ValueError:  # empty cell
                pass
    source = getattr(compiled_graph, "source_code", None)
    return sources.get(source) if source else None


# Copies keep their source's address modulo this many bytes: cuDNN's plan cache keys on
# each operand's pointer alignment (ATen's Conv_v8 getAlignment, up to 32 bytes), and the
# CUDA caching allocator hands out 512-byte-aligned blocks, so 512 covers both.
ALIGN_BYTES = 512


def copy_input(t):
    """A copy of one module input with the same sizes, strides *and address alignment*.

    Sizes and strides: the wrapper code asserts both (assert_size_stride), and a
    backward's saved tensors are often views into a larger buffer (a channel split, a
    concatenation), which clone() would make contiguous (seen on the H200: mixnet_l's and
    densenet121's backward modules).

    Alignment: such a view starts at an offset into its buffer (on the H200, 12 of
    mixnet_l's 618 backward inputs start off a 32-byte boundary, for example 16 bytes
    after a 40-channel split), and cuDNN's plan cache keys on each operand's alignment. A
    copy at a fresh, aligned address would have the module build plans the step never
    needed. (mixnet_l's 11.8 s backward warm-up was once blamed on this; with alignment
    kept it still took 12.9 s, and the cause was the thread: see tasks/module_thread.py.
    With both, the warm-up took 0.14 s; the alignment's own share of that was not
    measured apart.) The copy costs at most ALIGN_BYTES more than the
    view."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    if t.numel() == 0 or any(s < 0 for s in t.stride()):
        out = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
        out.copy_(t.detach())
        return out
    item = t.element_size()
    extent = 1 + sum((n - 1) * s for n, s in zip(t.size(), t.stride()))
    pad = ALIGN_BYTES // item
    buf = torch.empty(extent + pad, dtype=t.dtype, device=t.device)
    want = t.data_ptr() % ALIGN_BYTES
    have = buf.data_ptr() % ALIGN_BYTES
    offset = ((want - have) % ALIGN_BYTES) // item
    out = buf.as_strided(t.size(), t.stride(), offset)
    out.copy_(t.detach())
    return out


class InputCapture:
    """Keep a copy of the real inputs each compiled module receives in one step.

    The module-level profile runs each module on these, not on its generated get_args():
    get_args() fills integer tensors with zeros, and for some graphs (max-pool backward
    with offset indices, gathers) that computes out-of-range indices, which on a GPU is a
    device-side assert that poisons the whole CUDA context. Real inputs are also what the
    step really feeds the module. Costs one extra copy of each module's inputs.
    """

    def __init__(self, modules: list[CapturedModule]) -> None:
        self.inputs: dict[str, list] = {}
        self._sources = {}
        for m in modules:
            try:
                self._sources[Path(m.path).read_text()] = m.path
            except OSError:
                pass
        self._orig = None

    def __enter__(self) -> "InputCapture":
        CompiledFxGraph = compiled_graph_class()
        orig = CompiledFxGraph.__call__
        capture = self

        def __call__(graph, inputs):
            path = _module_file_of(graph, capture._sources)
            if path is not None and path not in capture.inputs:
                capture.inputs[path] = [copy_input(t) for t in inputs]
            return orig(graph, inputs)

        self._orig = orig
        CompiledFxGraph.__call__ = __call__
        return self

    def __exit__(self, *exc) -> None:
        compiled_graph_class().__call__ = self._orig
