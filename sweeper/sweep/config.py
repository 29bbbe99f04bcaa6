"""Typed configuration of one job, registered with Hydra's ConfigStore (sweeper/sweep/hydra_setup.py).

The YAML in conf/ only chooses values; every key a user may set is declared here, once:
its type and default (the field), its meaning (the comment on its line, or the comment
lines just above it), and the least value a number may take (`setting`). `declared_keys()` reads them for the help (help.py), the
command line's check (overrides.py), the composed jobs' check (validate.py) and the dry
run's estimate (estimate.py), so that none of them keeps a list of its own.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Dict, Mapping, Optional, get_type_hints



def setting(default: Any, *, minimum: float | None = None) -> Any:
    """A key's default with the least value it may take (None always allowed where the key
    is Optional)."""
    return field(default=default, metadata={"minimum": minimum})



class Mode(str, Enum):
    training = "training"
    inference = "inference"


class Device(str, Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


class AmpDtype(str, Enum):
    # auto: float16 on CUDA (what the seed and PyTorch's timm_models.py --amp use, with a
    # GradScaler), bfloat16 on CPU (float16 autocast on CPU is slow or unsupported).
    auto = "auto"
    float16 = "float16"
    bfloat16 = "bfloat16"


@dataclass
class MeasureConfig:
    """How long to measure. Defaults favour steady medians over speed."""

    warmup_steps: int = setting(5, minimum=1)  # after the compiling call; CUDA graphs record in the first ones
    timed_steps: int = setting(20, minimum=1)  # eager and compiled step time: median of these
    profile_steps: int = setting(5, minimum=1)  # steps of the real compiled step under the profiler
    # Module wall time: rounds of every module in turn (tasks/timing.rounds_in_turn), at
    # least module_min_rounds each and then more until module_span_s seconds have passed,
    # at most module_rounds each; their trimmed mean and spread. The span lets the rounds
    # sample a host whose launch speed switches every few seconds (docs/method.md).
    module_rounds: int = setting(100, minimum=1)
    module_min_rounds: int = setting(5, minimum=1)  # rounds of each module at least (see module_rounds)
    module_span_s: float = setting(8.0, minimum=0)  # seconds the module rounds last at least (see module_rounds)
    module_calls_per_round: int = setting(10, minimum=1)  # calls of a module in one timed round
    module_profile_calls: int = setting(10, minimum=1)  # calls of a compiled module under the profiler
    # Python's automatic garbage collection off inside timed and profiled loops, as timeit
    # does: a full collection of the compiler's heap stalls a round (tasks/gc_watch.py)
    pause_gc: bool = True
    # Seconds of the unprofiled compiled step in a steady loop (tasks/timing.steady_loop):
    # the busy figure's divisor, and on a GPU the window over which NVML's utilization
    # counter is read (tasks/nvml_util.py), whose samples come every 1/6 s to 1 s.
    # 0: no loop (busy divides by the timed steps' median; no NVML reading).
    steady_loop_s: float = setting(4.0, minimum=0)
    eager: bool = True  # also time the eager step (for the speedup)
    # check the compiled step's loss (or outputs) and gradients against eager's, with PyTorch's
    # benchmark runner's tolerances (tasks/accuracy.py); runs after every measurement
    accuracy: bool = True
    microbench: bool = True  # GPU: standalone benchmarks of the kernels holding 80% of Triton time
    # ...within this share of the job's compile-and-warm-up seconds (0: no limit). Every kernel
    # is timed alone first; the autotune headroom of the costliest ones fills what is left.
    microbench_budget_pct: float = setting(10.0, minimum=0)


@dataclass
class JobConfig:
    model: str = "resnet18"  # any timm model name; always built with pretrained=False
    batch_size: Optional[int] = setting(None, minimum=1)  # None: the curated per-model default (sweeper/models.py)
    image_size: Optional[int] = setting(None, minimum=1)  # None: the model's own input size
    mode: Mode = Mode.training  # a training step (forward and backward, no optimizer) or a forward alone
    amp: bool = True  # autocast (mixed precision)
    amp_dtype: AmpDtype = AmpDtype.auto  # auto: float16 on a GPU, bfloat16 on a CPU
    cudagraphs: bool = False  # Inductor's CUDA graphs (triton.cudagraphs)
    autotune: bool = False  # Inductor's max_autotune (compile mode max-autotune)
    device: Device = Device.auto  # auto: cuda where there is a GPU, else cpu
    seed: int = 0  # inputs and weights; several seeds repeat one configuration
    # Where the job-private Inductor/Triton cache folders go. None: inside the job folder.
    cache_root: Optional[str] = None
    # Extra torch._inductor.config options set in the job before it compiles, e.g.
    # +inductor.autotune_in_subproc=true (sweeper/inductor_options.py). Part of the job's key.
    inductor: Dict[str, Any] = field(default_factory=dict)
    # Where max-autotune results are kept on the driver's machine (sweeper/stores/autotune_store.py):
    # each autotune=on job is seeded with the timings of every job before it, this sweep's
    # and earlier sweeps' (same torch, Triton, CUDA and GPU model), and its new ones come
    # back with its results. off: every job autotunes from cold and nothing is kept.
    autotune_store: Optional[str] = "~/.cache/sweeper/autotune"
    # Where each job's compile is kept on the driver's machine (sweeper/stores/compile_store.py): the
    # same job in a later sweep loads it instead of compiling (same kernels; its compile_s is
    # then a warm figure, compile_state warm). Never shared between different jobs. off:
    # every job compiles cold.
    compile_store: Optional[str] = "~/.cache/sweeper/compile"
    # The Python environment the job runs in: a name from `pythons`, or an interpreter path.
    # None: the driver's own. Several (python=stable,nightly) compare builds in one sweep:
    # the report pairs the jobs that differ only in it (sweeper/sweep/pythons.py).
    python: Optional[str] = None
    # Names for interpreters, defined once: +pythons.nightly=/opt/nightly/bin/python.
    pythons: Dict[str, str] = field(default_factory=dict)
    # Seconds a job may run before it is killed and recorded as failed (0: no limit).
    # Max-autotune compiles of mid-size models take over 10 minutes on an H200.
    timeout_s: int = setting(3600, minimum=0)
    measure: MeasureConfig = field(default_factory=MeasureConfig)
    # Sweep-level keys (read from the first job's config by the launcher):
    dry_run: bool = False  # list the jobs the sweep would run (after every check), run none
    confirm_above: int = 50  # a sweep of more jobs asks for confirmation (or yes=true) first
    yes: bool = False  # run a sweep larger than confirm_above without asking


@dataclass(frozen=True)
class Key:
    """One settable key as declared above."""

    name: str  # dotted below the top level: "measure.eager"
    type: Any  # as declared, Optional[X] included
    default: Any
    doc: str  # the comment on the field's line, or the comment lines just above it
    minimum: float | None = None


def _comments(cls) -> dict[str, str]:
    """field name -> its comment: on its own line, else the comment lines just above."""
    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, str] = {}
    above: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        text = line.strip()
        if text.startswith("#"):
            above.append(text.lstrip("# ").strip())
            continue
        name = text.split(":", 1)[0].strip()
        if name in names and ":" in text:
            inline = text.split("#", 1)[1].strip() if "#" in text else ""
            out[name] = inline or " ".join(above)
        above = []
    return out


def _keys(cls, prefix: str = "") -> dict[str, Key]:
    hints, docs, out = get_type_hints(cls), _comments(cls), {}
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):  # measure: its keys, dotted
            out.update(_keys(hints[f.name], f"{prefix}{f.name}."))
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:  # a key every job must set (none is declared so now)
            default = None
        out[prefix + f.name] = Key(prefix + f.name, hints[f.name], default, docs.get(f.name, ""),
                                   f.metadata.get("minimum"))
    return out


@functools.cache
def declared_keys() -> Mapping[str, Key]:
    """Every key a user may set (measure.* dotted), in declaration order. Read once: the
    command line's check asks it for every value of a swept key (seed=range(0,100000))."""
    return MappingProxyType(_keys(JobConfig))
