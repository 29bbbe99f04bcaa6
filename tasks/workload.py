"""The model, its random inputs and the step that is compiled and measured.

Training step: zero the gradients, forward and cross-entropy loss under autocast (the
compiled part: AOTAutograd compiles its forward and backward graphs), then backward
(run by autograd, executing the compiled backward graph), scaled by a GradScaler under
float16. There is no optimizer step: like the seed's and PyTorch's timm benchmark, the
breakdown is of forward and backward; an optimizer's foreach kernels would run eagerly
and say nothing about the compiled model.

Inference step: forward under torch.no_grad() and autocast, model in eval mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


@dataclass
class Workload:
    model: torch.nn.Module
    inputs: torch.Tensor
    targets: torch.Tensor
    device: str
    training: bool
    amp_dtype: torch.dtype | None
    image_size: int
    num_classes: int

    def make_step(self, forward: Callable) -> Callable[[], torch.Tensor]:
        """A zero-argument step around `forward` (eager or compiled)."""
        x, y = self.inputs, self.targets
        if not self.training:

            def infer():
                with torch.no_grad():
                    return forward(x, y)

            return infer

        scaler = (
            torch.amp.GradScaler(self.device)
            if self.amp_dtype == torch.float16 and self.device == "cuda"
            else None
        )
        model = self.model

        def train():
            model.zero_grad(set_to_none=True)
            loss = forward(x, y)
            (scaler.scale(loss) if scaler is not None else loss).backward()
            return loss

        return train

    def forward_fn(self) -> Callable:
        """The function torch.compile sees: forward (and loss, when training)."""
        model, training, dtype, device = self.model, self.training, self.amp_dtype, self.device

        def forward(x, y):
            with torch.autocast(device_type=device, dtype=dtype or torch.float32, enabled=dtype is not None):
                out = model(x)
                if training:
                    return F.cross_entropy(out, y)
                return out

        return forward


def build_workload(
    model_name: str,
    batch_size: int,
    image_size: int | None,
    training: bool,
    amp_dtype: torch.dtype | None,
    device: str,
    seed: int = 0,
) -> Workload:
    import timm

    torch.manual_seed(seed)
    # pretrained=False always: weights do not change where time goes, and downloads are
    # neither reproducible nor possible on the GPU machines.
    model = timm.create_model(model_name, pretrained=False)
    cfg = getattr(model, "pretrained_cfg", {}) or {}
    in_chans, h, w = cfg.get("input_size", (3, 224, 224))
    size = image_size or h
    num_classes = getattr(model, "num_classes", 1000) or 1000
    model = model.to(device)
    model.train(training)
    x = torch.randn(batch_size, in_chans, size, size, device=device)
    y = torch.randint(0, num_classes, (batch_size,), device=device)
    return Workload(model, x, y, device, training, amp_dtype, size, num_classes)


def resolve_amp_dtype(amp: bool, amp_dtype: str, device: str) -> torch.dtype | None:
    if not amp:
        return None
    if amp_dtype == "auto":
        return torch.float16 if device == "cuda" else torch.bfloat16
    return {"float16": torch.float16, "bfloat16": torch.bfloat16}[amp_dtype]
