"""What the job ran on: library versions, GPU and driver, host. Never the process
environment: it can hold tokens, and result records get shared."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys

import torch


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment_of(device: str) -> dict:
    import timm

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    env = {
        "torch": torch.__version__,
        "triton": triton_version,
        "timm": timm.__version__,
        "python": platform.python_version(),
        "python_executable": sys.executable,  # the environment the job ran in (config key `python`)
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": __import__("os").cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "gpu": None,
        "gpu_count": 0,
        "driver": None,
        # Which GPU of the host the job held (set by Ray or by hand); not a secret.
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "compile_threads": _compile_threads(),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu=props.name,
            gpu_memory_gb=round(props.total_memory / 2**30, 1),
            gpu_capability=f"{props.major}.{props.minor}",
            gpu_count=torch.cuda.device_count(),
            driver=_driver_version(),
        )
    return env


def _compile_threads() -> int | None:
    """Inductor's compile worker count in this process (TORCHINDUCTOR_COMPILE_THREADS or its default)."""
    try:
        from sweeper.torch_internals.probes import inductor_config

        threads = inductor_config().compile_threads
        return None if threads is None else int(threads)
    except Exception:  # noqa: BLE001 - a description, never a failure
        return None
