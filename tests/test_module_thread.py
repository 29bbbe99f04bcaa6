"""tasks.module_thread: a backward module's measurements run as autograd backward work.

On a CPU the engine runs backward work on the calling thread, so the thread itself only
differs on a GPU (docs/findings.md); here the engine's part is checked."""

import threading

import pytest
import torch

from tasks.module_thread import on_backward_thread, on_step_thread


def test_backward_role_runs_inside_the_engine_with_grad_off():
    def inside():
        node = torch._C._current_autograd_node()
        return type(node).__name__ if node is not None else None, torch.is_grad_enabled()

    assert torch._C._current_autograd_node() is None
    assert on_step_thread("backward", inside, "cpu") == ("_RunInBackwardBackward", False)


def test_other_roles_run_directly_on_the_calling_thread():
    caller = threading.get_ident()
    for role in ("forward", "inference"):
        node, thread = on_step_thread(role, lambda: (torch._C._current_autograd_node(), threading.get_ident()), "cpu")
        assert node is None and thread == caller


def test_the_callable_s_exception_reaches_the_caller_unchanged():
    error = ValueError("module run failed")

    def fail():
        raise error

    with pytest.raises(ValueError) as raised:
        on_backward_thread(fail, "cpu")
    assert raised.value is error


def test_results_and_tensors_come_back():
    x = torch.arange(6.0).reshape(2, 3)
    out = on_backward_thread(lambda: {"sum": x.sum(), "shape": tuple(x.shape)}, "cpu")
    assert out["shape"] == (2, 3) and out["sum"].item() == 15.0
    assert not out["sum"].requires_grad
