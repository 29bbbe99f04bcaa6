"""Does a kernel seeded with its own coordinate-descent config skip tuning (GPU only)?

The autotune store seeds a job's Inductor cache with the `.best_config` files an earlier
job's coordinate descent wrote (sweeper/stores/autotune_store.py). Inductor should then not tune
those kernels again; on torch 2.11 it does, because the config's `found_by_coordesc` mark
is lost on its way back from a compile worker (sweeper/torch_internals/tuned_launch.py:
reused_tuned_configs). This compiles one small graph of reductions and pointwise kernels
with max-autotune (coordinate descent on, no mm, so no templates), three times, each in a
fresh process with a fresh Inductor cache (no FX-graph cache hit, every kernel compiled
in the compile workers, as in a job, once the worker pool is up; `--in-parent` compiles in
the process itself, as Inductor does before its pool is ready):

  cold     nothing seeded: every kernel tuned; its `.best_config` files kept
  seeded   the cold run's files put into the fresh cache first, Inductor as it is
  reused   the same, with reuse_tuned_configs() installed

and counts coordinate descent's benchmarks (counters["inductor"]["coordesc_tuning_bench"])
and the kernels whose file the run rewrote with another config.

    python bench/coordesc_reuse.py [--in-parent] [--out bench/results/coordesc_reuse/h200.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from store_diff import config_only  # noqa: E402 - bench/ is on the path when run as a script

ROOT = Path(__file__).resolve().parents[1]


def child(seed_file: str, reuse: bool, in_parent: bool, out_file: str) -> None:
    """One compile in this process (TORCHINDUCTOR_CACHE_DIR set by the parent)."""
    sys.path.insert(0, str(ROOT))
    cache = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    from sweeper.torch_internals import compile_cache, kernel_configs, probes
    from sweeper.torch_internals.tuned_launch import TunedLaunch, reused_tuned_configs

    seeded = kernel_configs.put_tuned_configs(cache, json.loads(Path(seed_file).read_text())) if seed_file else 0
    tuned = reused_tuned_configs().__enter__() if reuse else TunedLaunch()  # for the process's life
    installed = tuned.installed
    workers = False if in_parent else compile_cache.start_compile_workers()
    import torch
    from torch._dynamo.utils import counters

    def graph(x, w):
        y = torch.nn.functional.layer_norm(x, x.shape[-1:], w, None)
        s = torch.softmax(torch.nn.functional.gelu(y) * 2, dim=-1)
        return s.sum(dim=0), (y * s).mean(dim=1), torch.nn.functional.silu(x).amax(dim=-1)

    compiled = torch.compile(graph, mode="max-autotune-no-cudagraphs")
    gen = torch.Generator(device="cuda").manual_seed(0)
    t0 = time.time()
    sums = []
    for rows, cols in ((8192, 1024), (2048, 4096)):
        x = torch.randn(rows, cols, device="cuda", generator=gen)
        w = torch.randn(cols, device="cuda", generator=gen)
        sums += [float(t.double().sum()) for t in compiled(x, w)]
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    coordesc_s = sum(sum(v) for k, v in probes.compile_metrics().items() if k == "CachingAutotuner.coordinate_descent_tuning")
    Path(out_file).write_text(json.dumps({
        "seeded_files": seeded, "reuse_installed": installed, "compile_s": round(compile_s, 2),
        "coordesc_s": round(coordesc_s, 2), "coordesc_benchmarks": counters["inductor"]["coordesc_tuning_bench"],
        "cache_hits": probes.kernel_config_hits(), "reused": tuned.reused,
        "compile_threads": probes.inductor_config().compile_threads, "in_workers": workers, "sums": sums,
        "configs": kernel_configs.tuned_configs(cache)}))


def run(name: str, work: Path, seed: Path | None, reuse: bool, in_parent: bool) -> dict:
    out = work / f"{name}.json"
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(work / f"cache_{name}")}
    cmd = [sys.executable, __file__, "--child", str(out), "--seed", str(seed or ""),
           *(["--reuse"] if reuse else []), *(["--in-parent"] if in_parent else [])]
    subprocess.run(cmd, env=env, check=True)
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the three runs' figures here (JSON)")
    ap.add_argument("--in-parent", action="store_true", help="compile in the process, not in Inductor's worker pool")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--seed", default="", help=argparse.SUPPRESS)
    ap.add_argument("--reuse", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.seed, args.reuse, args.in_parent, args.child)
    import torch

    if not torch.cuda.is_available():
        sys.exit("bench/coordesc_reuse.py needs a CUDA GPU: coordinate descent tunes Triton kernels on the GPU")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        cold = run("cold", work, None, False, args.in_parent)
        seed = work / "seed.json"
        seed.write_text(json.dumps(cold["configs"]))
        runs = {"cold": cold, "seeded": run("seeded", work, seed, False, args.in_parent),
                "reused": run("reused", work, seed, True, args.in_parent)}
    rows = []
    for name, got in runs.items():
        changed = sum(1 for k, v in cold["configs"].items() if k in got["configs"] and config_only(got["configs"][k]) != config_only(v))
        rewritten = sum(1 for k, v in cold["configs"].items() if k in got["configs"] and got["configs"][k] != v)
        got.update(kernels=len(got["configs"]), rewritten_files=rewritten if name != "cold" else None,
                   other_config=changed if name != "cold" else None,
                   same_outputs=max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(got["sums"], cold["sums"])) < 1e-3)
        rows.append(f"| {name} | {got['seeded_files']} | {got['compile_s']} | {got['coordesc_s']} | {got['coordesc_benchmarks']} "
                    f"| {got['reused']} | {got['rewritten_files']} | {got['other_config']} | {got['same_outputs']} |")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, compile_threads {cold['compile_threads']}, "
          f"{'in the worker pool' if cold['in_workers'] else 'in the process'}, "
          f"{len(cold['configs'])} kernels tuned cold\n")
    print("| run | seeded files | first calls s | coordinate descent s | its benchmarks | reused | files rewritten "
          "| of them another config | outputs as cold |\n|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        for got in runs.values():
            got.pop("configs")
        Path(args.out).write_text(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                                              "command": "python bench/coordesc_reuse.py "
                                              + ("--in-parent " if args.in_parent else "") + "--out " + args.out,
                                              "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
