"""A competing load on every visible GPU: one process per GPU running a bf16 matmul loop,
until killed or --seconds pass. What a nightly regression check must flag
(bench/gpu_run.sh nightly, bench/results/nightly/).

    python bench/gpu_load.py [--seconds 900] [--size 8192]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time


def _loop(device: int, size: int, seconds: float) -> None:
    import torch

    torch.cuda.set_device(device)
    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    end, n = time.time() + seconds, 0
    while time.time() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()
        n += 20
    print(f"gpu {device}: {n} matmuls of {size}x{size}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=900)
    ap.add_argument("--size", type=int, default=8192)
    args = ap.parse_args()
    import torch

    procs = [mp.get_context("spawn").Process(target=_loop, args=(d, args.size, args.seconds))
             for d in range(torch.cuda.device_count())]
    for p in procs:
        p.start()
    print(f"load on {len(procs)} GPUs for up to {args.seconds:.0f} s", flush=True)
    for p in procs:
        p.join()


if __name__ == "__main__":
    main()
