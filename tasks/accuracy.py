"""Whether the compiled step computes what eager does: PyTorch's benchmark runner's
`--accuracy` check (benchmarks/dynamo/common.py with timm_models.py's tolerances), run on
the job's own model, inputs and compiled function.

Both sides run the same step from the same parameters: the loss (training) or the outputs
(inference), and every parameter's gradient, unscaled where float16's loss scale was
applied. A float64 copy of the model, run eagerly without autocast, is the reference that
torch._dynamo.utils.same() measures both against (an RMSE against the fp64 result, with the
tolerance as slack), as the runner does.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Callable

import torch

# timm_models.py (pytorch/benchmarks/dynamo), get_tolerance_and_cosine_flag: 1e-3 for
# inference, 1e-2 for training, more for the models it lists.
INFERENCE_TOL, TRAINING_TOL = 1e-3, 1e-2
HIGHER_TOL = {"inception_v3": 4e-2, "mobilenetv3_large_100": 4e-2, "deit_base_distilled_patch16_224": 8e-2,
              "vit_base_patch16_siglip_256": 8e-2, "beit_base_patch16_224": 16e-2}
LOSS_SCALE = 2.0 ** 16  # GradScaler's initial scale: the float16 step's loss is scaled by it


def tolerance(model: str, training: bool) -> float:
    return HIGHER_TOL.get(model, TRAINING_TOL) if training else INFERENCE_TOL


def _results(forward: Callable, workload, scale: float | None, before: Callable[[], None] | None = None) -> dict:
    """name -> tensor: the step's loss (or outputs) and each parameter's gradient, unscaled,
    in the dtype the step gave them (same() reads a float64 one as the reference)."""
    model, x, y = workload.model, workload.inputs, workload.targets
    torch.manual_seed(0)
    if before is not None:
        before()
    if not workload.training:
        with torch.no_grad():
            return {"outputs": forward(x, y).detach().clone()}
    model.zero_grad(set_to_none=True)
    loss = forward(x, y)
    (loss * scale if scale else loss).backward()
    out = {"loss": loss.detach().clone()}
    for name, p in model.named_parameters():
        if p.grad is not None:
            g = p.grad.detach()
            out[f"gradient of {name}"] = (g / scale if scale else g).clone()
    model.zero_grad(set_to_none=True)
    return out


def check(workload, compiled: Callable, model_name: str, cudagraphs: bool) -> dict:
    """The compiled forward's step against eager's, with a float64 reference: whether it
    passes, the tolerance, and the tensors that did not (the first five)."""
    from sweeper.torch_internals.probes import runner_same

    same = runner_same()
    scale = LOSS_SCALE if workload.amp_dtype == torch.float16 and workload.device == "cuda" else None
    tol = tolerance(model_name, workload.training)
    ref = _results(workload.forward_fn(), workload, scale)
    mark = torch.compiler.cudagraph_mark_step_begin if cudagraphs else None
    res = _results(compiled, workload, scale, mark)
    m64 = copy.deepcopy(workload.model).double()
    w64 = replace(workload, model=m64, inputs=workload.inputs.double(), amp_dtype=None)
    fp64 = _results(w64.forward_fn(), w64, None)
    del m64, w64
    failed = [name for name in ref if name in res and name in fp64
              and not same(ref[name], res[name], fp64[name], tol=tol, equal_nan=True, log_error=lambda *a, **k: None)]
    missing = sorted(set(ref) ^ set(res))
    return {"checked": True, "passed": not failed and not missing, "tolerance": tol, "compared": len(ref),
            "failed": failed[:5], "failed_count": len(failed), "missing": missing[:5],
            "method": "torch._dynamo.utils.same against eager with a float64 reference (PyTorch's benchmark "
                      "runner's --accuracy, timm tolerances)"}
