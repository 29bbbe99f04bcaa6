"""Run a module's measurements on the thread that runs that module in the real step.

A training step's compiled backward runs on the autograd engine's device thread, not on
the job's main thread, and some of what the module needs warm lives per thread: ATen's
cuDNN plan cache (the v8 API's `benchmark_cache`, Conv_v8.cpp) is thread_local. Timed
from the main thread, mixnet_l's backward (fp16, batch 128, H200) spent 11.8 and 12.9 s
of its warm-up building again every convolution plan the step had already built (session
5 and 6; the forward, run by the step on the main thread, warmed up in 0.07 s).
"""

from __future__ import annotations

from typing import Callable, TypeVar

import torch

T = TypeVar("T")


class _RunInBackward(torch.autograd.Function):
    """Identity forward; its backward runs the callable kept in `box`, on whichever thread
    the engine runs backward work for the tensor's device."""

    @staticmethod
    def forward(ctx, x, box):
        ctx.box = box
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        box = ctx.box
        try:
            box["result"] = box["fn"]()
        except BaseException as e:  # noqa: BLE001 - handed back to the caller's thread
            box["error"] = e
        return grad, None


def on_backward_thread(fn: Callable[[], T], device: str) -> T:
    """fn() run by the autograd engine as backward work on `device`, returning its result
    or raising its exception in the caller. On a CUDA device that is the engine's device
    thread, the one that ran the step's compiled backward (it lives as long as the
    process); on a CPU the engine runs backward work on the calling thread. Grad mode is
    off inside, as it is in the step's backward."""
    box: dict = {"fn": fn}
    x = torch.zeros((), device=device, requires_grad=True)
    with torch.enable_grad():
        y = _RunInBackward.apply(x, box)
    y.backward()
    if "error" in box:
        raise box["error"]
    return box["result"]


def on_step_thread(role: str, fn: Callable[[], T], device: str) -> T:
    """fn() on the thread where the step runs modules of `role`: a backward module on the
    autograd engine's thread, every other module (forward, inference) on this one."""
    if role == "backward":
        return on_backward_thread(fn, device)
    return fn()
