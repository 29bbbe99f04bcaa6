from sweeper.analysis import module_source as ms

from conftest import read_text


def test_roles_of_real_h200_modules(h200):
    fwd = read_text(h200 / "resnet18_forward_0.py.gz")
    bwd = read_text(h200 / "resnet18_backward_1.py.gz")
    assert ms.module_role(fwd) == ms.FORWARD
    assert ms.module_role(bwd) == ms.BACKWARD
    assert ms.is_compiled_module(fwd) and ms.is_compiled_module(bwd)


def test_kernel_paths_of_real_h200_module(h200):
    info = ms.parse_module(read_text(h200 / "resnet18_forward_0.py.gz"))
    assert info.has_get_args and info.has_call
    triton = {n: p for n, p in info.kernels.items() if n.startswith("triton_")}
    assert len(triton) > 10
    assert all(p and p.endswith(".py") for p in triton.values())
    assert any(n.startswith("triton_poi_") for n in triton)
    assert any(n.startswith("triton_red_") for n in triton)


def test_kernel_files_are_not_compiled_modules(h200):
    for kind in ("triton_poi", "triton_red", "triton_per"):
        src = (h200 / f"{kind}.py").read_text()
        assert not ms.is_compiled_module(src)
        assert "triton_heuristics" in src  # the decorator that also tells the kind


def test_inference_role_and_inline_cpp_kernels():
    src = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['const float*', 'float*'], r\'\'\'
extern "C" void kernel() {}
\'\'\')

def call(args):
    arg0_1, arg1_1 = args
    args.clear()
'''
    info = ms.parse_module(src)
    assert info.role == ms.INFERENCE
    assert info.kernels == {"cpp_fused_relu_0": None}


def test_captured_inputs_keep_the_strides_of_views():
    import torch

    from tasks.capture import copy_input

    buf = torch.randn(4, 8, 3, 3)
    view = buf[:, 2:6]  # a channel slice: not contiguous, strides of the larger buffer
    assert not view.is_contiguous()
    copy = copy_input(view)
    assert copy.size() == view.size() and copy.stride() == view.stride()
    assert torch.equal(copy, view) and copy.data_ptr() != view.data_ptr()
    # what the generated wrapper code checks before it runs
    torch._C._dynamo.guards.assert_size_stride(copy, tuple(view.size()), tuple(view.stride()))
    assert view.clone().stride() != view.stride()  # why clone() was not enough
    assert copy_input(3) == 3


def test_captured_inputs_keep_the_address_alignment_of_views():
    """A view that starts off a 32-byte boundary is copied to an address just as far off
    (cuDNN's plan cache keys on it; see copy_input), at a cost of under 512 bytes."""
    import torch

    from tasks.capture import ALIGN_BYTES, copy_input

    buf = torch.randn(2, 40 * 3, 7, 7, dtype=torch.float16)
    for start in (0, 40, 80, 1, 3):  # channel offsets, and odd element offsets
        view = buf[:, start:start + 40] if start % 40 == 0 else buf.view(-1)[start:start + 999]
        copy = copy_input(view)
        assert copy.data_ptr() != view.data_ptr()
        assert copy.data_ptr() % ALIGN_BYTES == view.data_ptr() % ALIGN_BYTES
        assert copy.size() == view.size() and copy.stride() == view.stride()
        assert torch.equal(copy, view)
        extent = 1 + sum((n - 1) * s for n, s in zip(view.size(), view.stride()))
        assert copy.untyped_storage().nbytes() <= (extent * 2) + ALIGN_BYTES
    # the case that matters is really exercised: some views are off a 32-byte boundary
    assert any(buf[:, s:s + 40].data_ptr() % 32 for s in (40, 80))
    empty = copy_input(torch.empty(0, 3))
    assert empty.shape == (0, 3)


def test_kernel_sources_are_the_wrappers_inline_triton_kernels(h200):
    source = read_text(h200 / "resnet18_forward_0.py.gz")
    inline = ms.kernel_sources(source)
    assert set(inline) == {n for n in ms.kernel_definitions(source) if n.startswith("triton_")}
    assert all(f"def {name}(" in text and "@triton.jit" in text for name, text in inline.items())
