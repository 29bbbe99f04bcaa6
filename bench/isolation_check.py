"""Max-autotune's choices for a few layers, timed again outside the model: a check of the
regret table's "benchmark-only win" (docs/method.md, "Where max-autotune loses"), which sets
max-autotune's own timings of each choice alone beside the layer's time in the model.

For each layer (a timm block, e.g. resnet50's `layer3.0`), on the layer's real input (captured
from one forward of the whole model, under autocast as a job runs it), the kernels' time a
call (the profiler's, as the report's figures):
- in its block: the block compiled by default (cuDNN and Triton epilogues) against the block
  compiled with max-autotune (templates with their epilogues fused);
- alone: each convolution of the block, eager (the library call, what autotune off runs)
  against compiled alone with max-autotune (the choice it makes for that op alone: a Triton
  template or the library call, read from the generated code).
A layer whose max-autotune convolutions are faster alone and whose block is slower is an
isolation-only win; slower alone too, the choice was wrong where max-autotune timed it right
or its benchmark of the library call was off (set the per-convolution figures of the JSON
beside the decisions' `winner_ms` and `library_ms`).

    python bench/isolation_check.py --model resnet50 --batch 64 --layers layer1.0,layer2.0,layer3.0 [--json OUT]
    python bench/isolation_check.py --model resnet50 --batch 2 --image 64 --layers layer1.0 --device cpu   # a smoke run

The GPU run: `bash bench/gpu_run.sh isolation_check` (results: bench/results/autotune_advice/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

NOISE_PCT = 5.0  # the kernels' run-to-run noise the report holds a change against (autotune_verdict)


def _bench(fn, device: str) -> float:
    """ms a call. On a GPU the kernels' time a call (the profiler's kernel durations over 20
    calls after 5, summed), the figure the regret table compares: a small compiled call's wall
    time is its launches' (a first do_bench run read a compiled 1x1 convolution alone at twice
    the eager one's). On a CPU the median of 20 timed calls after 3."""
    if device == "cuda":
        import torch
        from torch.profiler import ProfilerActivity, profile

        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                fn()
            torch.cuda.synchronize()
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        return sum(e.time_range.elapsed_us() for e in kernels) / 1000 / 20
    for _ in range(3):
        fn()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _chosen(compiled, x) -> str:
    """What the compiled module runs for its convolution: "Triton template", "library" or both."""
    from torch._inductor.utils import run_and_get_code

    _, code = run_and_get_code(compiled, x)
    calls = [line for text in code for line in text.splitlines() if not line.lstrip().startswith("#")]
    template = any("triton_tem_" in line for line in calls)
    library = any(f"extern_kernels.{op}(" in line for line in calls for op in ("convolution", "mm", "addmm", "bmm"))
    return "Triton template and library" if template and library else "Triton template" if template else \
        "library" if library else "-"


def check(model_name: str, batch: int, image: int | None, layers: list[str], device: str) -> list[dict]:
    import timm
    import torch

    model = timm.create_model(model_name, pretrained=False).eval().to(device)
    if device == "cuda":
        model = model.to(memory_format=torch.channels_last)
    size = image or model.default_cfg["input_size"][-1]
    x = torch.randn(batch, 3, size, size, device=device)
    if device == "cuda":
        x = x.to(memory_format=torch.channels_last)
    autocast = torch.autocast(device, dtype=torch.float16 if device == "cuda" else torch.bfloat16)
    inputs: dict[str, torch.Tensor] = {}
    hooks = []

    def keep(name: str):
        def hook(module, args, out) -> None:  # returns nothing: a hook's return value replaces the output
            inputs.setdefault(name, args[0].detach())
        return hook

    for name, module in model.named_modules():
        if name in layers or any(name.startswith(layer + ".") for layer in layers):
            hooks.append(module.register_forward_hook(keep(name)))
    with torch.no_grad(), autocast:
        model(x)
    for h in hooks:
        h.remove()

    def timed(fn, arg) -> float:
        def call():
            with torch.no_grad(), autocast:
                fn(arg)
        return _bench(call, device)

    out = []
    for layer in layers:
        block = model.get_submodule(layer)
        t0 = time.time()
        torch._dynamo.reset()
        default = torch.compile(block)
        tuned = torch.compile(block, mode="max-autotune-no-cudagraphs")
        row: dict = {"layer": layer, "block_default_ms": timed(default, inputs[layer]),
                     "block_autotune_ms": timed(tuned, inputs[layer]), "convs": []}
        for name, module in block.named_modules():
            full = f"{layer}.{name}"
            if not isinstance(module, torch.nn.Conv2d) or full not in inputs:
                continue
            alone = torch.compile(module, mode="max-autotune-no-cudagraphs")
            with torch.no_grad(), autocast:
                chosen = _chosen(alone, inputs[full])
            row["convs"].append({"module": full, "name": name, "library_ms": timed(module, inputs[full]),
                                 "autotune_ms": timed(alone, inputs[full]), "chosen": chosen})
        row["alone_library_ms"] = sum(c["library_ms"] for c in row["convs"])
        row["alone_autotune_ms"] = sum(c["autotune_ms"] for c in row["convs"])
        row["seconds"] = time.time() - t0
        row["word"] = _word(row)
        out.append(row)
        print(_line(row), flush=True)
    return out


def _word(row: dict) -> str:
    """isolation-only win, a win, a loss or within noise, from the two pairs of figures."""
    block = (row["block_autotune_ms"] / row["block_default_ms"] - 1) * 100
    alone = (row["alone_autotune_ms"] / row["alone_library_ms"] - 1) * 100 if row["alone_library_ms"] else 0.0
    if block > NOISE_PCT and alone < -NOISE_PCT:
        return "isolation-only win"
    if block > NOISE_PCT:
        return "slower alone and in its block"
    if block < -NOISE_PCT:
        return "faster in its block"
    return "within noise in its block"


def _line(row: dict) -> str:
    chosen = ", ".join(f"{c['name']}: {c['chosen']}" for c in row["convs"])
    return (f"| {row['layer']} | {row['block_default_ms']:.3f} | {row['block_autotune_ms']:.3f} | "
            f"{row['alone_library_ms']:.3f} | {row['alone_autotune_ms']:.3f} | {row['word']} | {chosen} | "
            f"{row['seconds']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image", type=int, default=None)
    ap.add_argument("--layers", default="layer1.0,layer2.0,layer3.0")
    ap.add_argument("--device", default=None, help="default: cuda where there is a GPU, else cpu")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(f"## {args.model} b{args.batch} inference on {torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}, "
          f"torch {torch.__version__}\n")
    print("| layer | block, default ms | block, max-autotune ms | convolutions alone, library ms | "
          "convolutions alone, max-autotune ms | word | chosen alone | s |")
    print("|---|---|---|---|---|---|---|---|")
    rows = check(args.model, args.batch, args.image, [s for s in args.layers.split(",") if s], device)
    if args.json:
        args.json.write_text(json.dumps({"model": args.model, "batch": args.batch, "device": device,
                                         "torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
