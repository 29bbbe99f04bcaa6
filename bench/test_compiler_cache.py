"""What the test suite's compiler cache (tests/tools/cxx_cache.sh) saves a cold CPU compile: one
small timm model compiled in a fresh process and a fresh Inductor cache three ways, g++ as
Inductor calls it, the cache empty (every kernel built and kept), and the cache warm (every
kernel read back); seconds of the first compiled call and the C++ builds each made.

    python bench/test_compiler_cache.py [--models test_resnet,test_vit] [--out FILE]

Each compile is its own process, one after another, so the seconds are comparable only
within one run of this script (CPU timings here move by a quarter between runs).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = ROOT / "tests" / "tools" / "cxx_cache.sh"

# One compile in a process of its own: model, batch 2, 32x32 inputs, inference (the tests' TINY).
CHILD = """
import sys, time
import torch, timm
m = timm.create_model(sys.argv[1], pretrained=False).eval()
x = torch.randn(2, 3, 32, 32)
t0 = time.time()
with torch.no_grad():
    torch.compile(m)(x)
print(round(time.time() - t0, 2))
"""


def compile_once(model: str, cxx: str | None, cache: Path | None) -> float:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="inductor-"))
    env.pop("CXX", None)
    if cxx:
        env["CXX"], env["SWEEPER_TEST_CXX_CACHE"] = cxx, str(cache)
    out = subprocess.run([sys.executable, "-c", CHILD, model], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="test_resnet,test_vit")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    lines = ["| model | g++ (s) | cache empty (s) | cache warm (s) | warm / g++ |", "|---|---|---|---|---|"]
    for model in args.models.split(","):
        cache = Path(tempfile.mkdtemp(prefix="cxx-cache-"))
        plain = compile_once(model, None, None)
        empty = compile_once(model, str(WRAPPER), cache)
        warm = compile_once(model, str(WRAPPER), cache)
        built = len(list(cache.glob("*.so")))
        lines.append(f"| {model} ({built} kernel libraries) | {plain:.1f} | {empty:.1f} | {warm:.1f} | {warm / plain:.2f} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(f"`python bench/test_compiler_cache.py --models {args.models}`\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
