"""The GPU's state per timed stretch, as the steady loop records it: NVML's raw answers
(clocks, power in mW, temperature, the clock event reasons' mask) at the end of each
stretch of timing.steady_loop, over a matmul loop that heats the GPU, then an idle wait.
The raw answers are what tests/test_gpu_state.py replays through nvml_util.GpuStateReader
(a stand-in for pynvml that returns them), so the reader and loop_state are tested on a
real GPU's values on a machine without one.

    python bench/gpu_state_capture.py [--seconds 60] [--out state.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class Recording:
    """pynvml, its answers kept (method name, args but the handle, the answer)."""

    def __init__(self, nvml):
        self.nvml, self.calls = nvml, []

    def __getattr__(self, name):
        real = getattr(self.nvml, name)
        if not callable(real) or not name.startswith("nvmlDevice"):
            return real

        def call(handle, *args):
            got = real(handle, *args)
            self.calls.append([name, list(args), got])
            return got
        return call


def main(argv=None) -> int:
    import pynvml
    import torch

    from sweeper.analysis.gpu_state import loop_state, state_words
    from tasks import nvml_util
    from tasks.timing import steady_loop

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--out", type=Path, default=Path("gpu_state.json"))
    a = ap.parse_args(argv)
    rec = Recording(pynvml)
    a_ = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b_ = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def step():
        return a_ @ b_

    reader = nvml_util.GpuStateReader(nvml=rec)
    runs = []
    with reader as read:
        for label, seconds in (("matmul 8192 bf16, first seconds", 8.0), ("matmul 8192 bf16, heated", a.seconds)):
            loop = steady_loop(step, seconds, "cuda", state=read)
            state = loop_state(loop["gpu_rounds"], loop["chunk_step_ms"])
            runs.append({"label": label, "loop": loop, "state": state})
            print(f"{label}: step {loop['step_ms']:.3f} ms; {state_words(state)}", flush=True)
        time.sleep(2)
        idle = [read() for _ in range(3)]
    out = {"gpu": torch.cuda.get_device_name(), "driver": pynvml.nvmlSystemGetDriverVersion(),
           # a device handle (a ctypes pointer) kept as its text: a replay hands it back unread
           "nvml_calls": [[n, args, v if isinstance(v, (int, float)) else str(v)] for n, args, v in rec.calls],
           "runs": runs, "idle": idle, "reason": reader.reason}
    a.out.write_text(json.dumps(out, indent=1, default=str))
    print(f"wrote {a.out}: {len(rec.calls)} NVML answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
