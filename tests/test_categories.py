from sweeper.analysis import categories as c
from sweeper.analysis import trace as tr


def test_triton_prefixes_name_the_category():
    assert c.categorize("triton_poi_fused_add_relu_3") == c.TRITON_POINTWISE
    assert c.categorize("triton_red_fused__native_batch_norm_legit_functional_16") == c.TRITON_REDUCTION
    assert c.categorize("triton_per_fused_mean_7") == c.TRITON_PERSISTENT
    assert c.categorize("triton_tem_fused_mm_0") == c.TRITON_TEMPLATE
    assert c.categorize("triton_for_fused_1") == c.TRITON_FOREACH
    assert c.categorize("triton_") == c.TRITON_OTHER


def test_vendor_and_aten_kernels():
    assert c.categorize("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc") == c.LIBRARY
    assert c.categorize("nvjet_sm90_hsh_64x8_64x16_4x1_v_bz_NNT") == c.LIBRARY
    assert c.categorize("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_f16_s16816fprop>") == c.LIBRARY
    assert c.categorize("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>") == c.ATEN
    assert c.categorize("Memcpy DtoD (Device -> Device)", "gpu_memcpy") == c.MEMORY
    assert c.categorize("Memset (Device)", "gpu_memset") == c.MEMORY


def test_cpu_kernels():
    assert c.categorize("graph_0_cpp_fused__native_batch_norm_legit_functional_1", "cpu_op") == c.CPP
    assert c.categorize("aten::mkldnn_convolution", "cpu_op") == c.LIBRARY
    assert c.categorize("aten::convolution_backward", "cpu_op") == c.LIBRARY
    assert c.categorize("aten::addmm", "cpu_op") == c.LIBRARY
    assert c.categorize("aten::add_", "cpu_op") == c.ATEN


def test_every_kernel_of_a_real_h200_step_has_a_known_category(h200):
    kernels = tr.device_kernels(tr.load_trace(h200 / "resnet18_step.json.gz"))
    assert len(kernels) > 1000
    cats = {c.categorize(k.name, k.cat) for k in kernels}
    assert c.OTHER not in cats, [k.name for k in kernels if c.categorize(k.name, k.cat) == c.OTHER][:5]
    assert {c.TRITON_POINTWISE, c.TRITON_REDUCTION, c.TRITON_PERSISTENT, c.LIBRARY} <= cats


def test_reference_categories_follow_wrapper_benchmark():
    assert c.reference_category(c.TRITON_POINTWISE) == "triton_pointwise"
    assert c.reference_category(c.TRITON_TEMPLATE) == "triton_unknown"
    assert c.reference_category(c.LIBRARY) == "unknown"
    assert c.reference_category(c.MEMORY) == "unknown"


def test_a_figure_of_one_device_names_that_devices_libraries():
    """A CPU run's legend names no GPU library, a GPU run's no CPU one; a sweep of both, all."""
    assert c.category_label(c.LIBRARY, "CPU") == "Library mm/conv (oneDNN, BLAS)"
    assert c.category_label(c.LIBRARY, "GPU") == "Library mm/conv (cuBLAS, cuDNN, CUTLASS, nvjet)"
    assert c.category_label(c.LIBRARY, "device") == c.CATEGORIES[c.LIBRARY]
    assert "oneDNN" in c.CATEGORIES[c.LIBRARY] and "cuDNN" in c.CATEGORIES[c.LIBRARY]
    assert c.category_label(c.TRITON_POINTWISE, "CPU") == "Triton pointwise"
