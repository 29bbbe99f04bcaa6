"""The device's roofs as a job measures them (tasks/roofs.py) against the datasheet, and
how they move with the product's size and between repeats; then that a second job of
the same device and build reuses the kept roofs instead of measuring again.

    python bench/roofs_check.py            (on a GPU machine; on a CPU it measures the CPU)
Writes a Markdown table to stdout.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Dense (no sparsity) datasheet figures of the SXM parts, TFLOP/s, and HBM bandwidth, GB/s
# (a copy of N bytes moves 2N through memory; the measured figure counts those 2N).
DATASHEET = {
    "H100": {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7, "float32": 66.9, "hbm_gbps": 3350},
    "H200": {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7, "float32": 66.9, "hbm_gbps": 4800},
}


def main() -> None:
    os.environ.setdefault("SWEEPER_ROOFS", tempfile.mkdtemp(prefix="roofs-"))
    import torch

    from tasks import roofs

    device = "cuda" if torch.cuda.is_available() else "cpu"
    name = torch.cuda.get_device_name() if device == "cuda" else roofs.key("cpu")["device"]
    sheet = next((v for k, v in DATASHEET.items() if k in name), {})
    print(f"# Roofs of {name}\n\ntorch {torch.__version__}; `python bench/roofs_check.py`\n")
    first = roofs.roofs(device)
    again = roofs.roofs(device)
    print(f"A job's roofs (tasks/roofs.py, {first['seconds']} s): measured then {'reused' if again['reused'] else 'MEASURED AGAIN'} "
          f"by the next (kept in {roofs.roofs_dir()}).\n")
    print("| roof | n | repeats (TFLOP/s or GB/s) | median | datasheet | % of datasheet |\n|---|---|---|---|---|---|")
    sizes = (4096, 8192, 16384) if device == "cuda" else (1024, 2048)
    for dtype in (roofs.GPU_DTYPES if device == "cuda" else roofs.CPU_DTYPES):
        for n in sizes:
            got = [roofs.matmul_tflops(device, dtype, n) for _ in range(3)]
            med = statistics.median(got)
            ds = sheet.get(dtype)
            print(f"| matmul {dtype} | {n} | {', '.join(f'{g:.1f}' for g in got)} | {med:.1f} | {ds or '–'} | "
                  f"{f'{100 * med / ds:.0f}' if ds else '–'} |")
    copies = [roofs.copy_gbps(device) for _ in range(3)]
    med = statistics.median(copies)
    ds = sheet.get("hbm_gbps")
    size = "1 GiB" if device == "cuda" else "256 MiB"
    print(f"| copy (read + write) | {size} | {', '.join(f'{c:.0f}' for c in copies)} | {med:.0f} | {ds or '–'} | "
          f"{f'{100 * med / ds:.0f}' if ds else '–'} |")
    print(f"\nThe job's roofs: copy {first['copy_gbps']:.0f} GB/s; matmul "
          + ", ".join(f"{d} {v:.1f}" for d, v in first["matmul_tflops"].items()) + " TFLOP/s")


if __name__ == "__main__":
    main()
