"""How many of a compiled training step's module inputs start off a 32-byte boundary, and
whether the copies that a job times its modules on (tasks/capture.copy_input) keep that.

Why: on the H200 (session 5), mixnet_l's backward module spent 11.8 s in its first three
calls on copied inputs, against 0.4 s for densenet121's. cuDNN's plan cache keys on each
operand's address alignment (up to 32 bytes), and session 5 blamed copies at fresh,
aligned addresses. This script shows, for a real compile, which inputs start off a
boundary, and that copy_input keeps their alignment. Session 6 ran it on the GPU (12 of
618 backward inputs are misaligned, and all kept their alignment), yet the warm-up stayed
at 12.9 s. The cause was the thread the module ran on (tasks/module_thread.py;
bench/results/h200_session6.md).

    python bench/input_alignment.py                      # mixnet_l, training, batch 1, 224 px, CPU, bf16
    python bench/input_alignment.py --device cuda --batch 128       # the H200 job's settings (fp16)

Autocast runs in a 2-byte dtype on both devices (float16 on a GPU, bfloat16 on a CPU), as
the GPU jobs do: a channel split's offset in bytes, and so its alignment, depends on the
dtype and the image size, not on the batch.

Prints a Markdown table, one row per compiled module.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mixnet_l")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    import torch
    from torch._inductor.output_code import CompiledFxGraph

    from tasks.capture import ALIGN_BYTES, ModuleCapture, _module_file_of, copy_input
    from tasks.workload import build_workload

    amp = torch.float16 if args.device == "cuda" else torch.bfloat16
    w = build_workload(args.model, args.batch, args.image_size, True, amp, args.device)
    step = w.make_step(torch.compile(w.forward_fn()))
    t0 = time.time()
    capture = ModuleCapture()
    with capture:
        step()
    compile_s = time.time() - t0
    sources = {Path(m.path).read_text(): m for m in capture.modules}

    rows = {}
    orig_call = CompiledFxGraph.__call__

    def inspect(graph, inputs):
        path = _module_file_of(graph, {src: m.path for src, m in sources.items()})
        if path is not None and path not in rows:
            tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
            off = [t for t in tensors if t.data_ptr() % 32]
            plain = [torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device) for t in off]
            kept = [copy_input(t).data_ptr() % ALIGN_BYTES == t.data_ptr() % ALIGN_BYTES for t in tensors]
            rows[path] = {
                "tensors": len(tensors),
                "at_offset": sum(1 for t in tensors if t.storage_offset()),
                "off_32": len(off),
                "plain_copy_aligned": sum(1 for c in plain if c.data_ptr() % 32 == 0),
                "copy_input_kept": sum(kept),
            }
        return orig_call(graph, inputs)

    CompiledFxGraph.__call__ = inspect
    try:
        step()
    finally:
        CompiledFxGraph.__call__ = orig_call

    print(f"command: `python bench/input_alignment.py --model {args.model} --batch {args.batch} "
          f"--image-size {args.image_size} --device {args.device}`; autocast {str(amp).replace('torch.', '')}; "
          f"torch {torch.__version__}; "
          f"compile {compile_s:.0f} s\n")
    print("| module | tensor inputs | views at an offset | off a 32-byte boundary | of those, a plain "
          "empty_strided copy is aligned | copy_input kept the address mod 512 |")
    print("|---|---|---|---|---|---|")
    for m in capture.modules:
        r = rows.get(m.path)
        if r is None:
            print(f"| {m.label()} | not called in the step | | | | |")
            continue
        print(f"| {m.label()} | {r['tensors']} | {r['at_offset']} | {r['off_32']} | "
              f"{r['plain_copy_aligned']} | {r['copy_input_kept']} of {r['tensors']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
