"""The compiled step against eager (tasks/accuracy.py): a real torch.compile on the CPU of a
small module of the tests' own passes PyTorch's benchmark runner's check, and the same
compile with Inductor's own bug-injection option (a wrong ReLU in its C++ kernels) fails it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from tasks import accuracy  # noqa: E402
from tasks.workload import Workload  # noqa: E402


def test_the_tolerances_are_the_timm_runners():
    assert accuracy.tolerance("resnet18", training=False) == 1e-3
    assert accuracy.tolerance("resnet18", training=True) == 1e-2
    assert accuracy.tolerance("mobilenetv3_large_100", training=True) == 4e-2


def workload() -> Workload:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 5))
    return Workload(model, torch.randn(4, 3, 12, 12), torch.randint(0, 5, (4,)), "cpu", True, None, 12, 5)


@pytest.mark.slow
@pytest.mark.parametrize("bug", [None, "accuracy"])
def test_a_compiled_step_that_computes_otherwise_is_caught(bug, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    torch._dynamo.reset()
    w = workload()
    with torch._inductor.config.patch({"cpp.inject_relu_bug_TESTING_ONLY": bug, "fx_graph_cache": False}):
        got = accuracy.check(w, torch.compile(w.forward_fn()), "net", cudagraphs=False)
    torch._dynamo.reset()
    assert got["checked"] and got["compared"] == 7  # the loss and six parameters' gradients
    if bug is None:
        assert got["passed"] and got["failed"] == [], got
    else:  # the ReLU's output is wrong: the loss and the gradients before it
        assert not got["passed"] and "loss" in got["failed"], got


def test_a_job_that_failed_the_check_is_named_with_its_tensors():
    import pandas as pd

    from sweeper.reporting.findings import accuracy_failed

    jobs = pd.DataFrame([{"job": 0, "label": "net b4 train", "status": "ok", "accuracy": "failed",
                          "accuracy_failed": "2 of 7 (tolerance 0.01): loss, gradient of 5.weight"},
                         {"job": 1, "label": "net b8 train", "status": "ok", "accuracy": "passed",
                          "accuracy_failed": None}])
    found = accuracy_failed(jobs)
    assert [f.scope for f in found] == ["net b4 train"]
    assert found[0].text.startswith("net b4 train: its compiled step does not compute what eager does: 2 of 7 "
                                    "(tolerance 0.01): loss, gradient of 5.weight outside")
