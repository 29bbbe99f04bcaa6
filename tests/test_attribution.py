"""From a kernel to the model's code (sweeper/analysis/attribution.py, tasks/provenance.py):
the pure placement on hand-made launch sequences, and a real torch.compile of a small
module of the tests' own, with a graph break, through the capture the job uses."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper.analysis import attribution as at
from sweeper.analysis import library_placement as lp
from sweeper.analysis import launch_sites as ls
from sweeper.analysis import node_tags as nt
from sweeper.analysis import module_rollup as mr
from sweeper.analysis.graph_breaks import graph_break, graph_breaks
from sweeper.analysis.trace import Interval


def stack(file: str, line: int, code: str, pass_: str, path: str, cls: str, node: str) -> str:
    return (f'  File "/venv/lib/python3.12/site-packages/{file}", line {line}, in forward\n    {code}\n'
            + nt.tag_line(pass_, path, cls, node))


def test_dynamo_module_paths_read_as_named_modules_spells_them():
    assert nt.normalize_path("L['self'].layer4[0].bn2") == "layer4.0.bn2"
    assert nt.normalize_path("G['model'].features.denseblock3.denselayer12.conv2") == \
        "features.denseblock3.denselayer12.conv2"
    assert nt.normalize_path("L['self'].blocks._modules['2'].conv") == "blocks.2.conv"
    assert nt.normalize_path("L['self']") == ""
    assert ls.fit_path("model.layer4.0.bn2", {"layer4", "layer4.0", "layer4.0.bn2"}) == "layer4.0.bn2"
    assert ls.fit_path("nowhere.x", {"layer4"}) == "nowhere.x"  # never made up


def test_a_tag_reads_back_with_its_node_and_the_stacks_innermost_frame():
    s = stack("timm/models/resnet.py", 153, "x = self.bn2(x)", "backward", "L['self'].layer4[0].bn2",
              "BatchNorm2d", "native_batch_norm_backward_3")
    assert nt.read_tags(s) == [nt.Tag(nt.Layer("layer4.0.bn2", "BatchNorm2d", "backward"), "native_batch_norm_backward_3")]
    # a matmul's tag carries its work, and reads back
    w = nt.Work(2 * 64 * 512 * 1000, 2 * (64 * 512 + 512 * 1000 + 64 * 1000), "float16")
    tagged = nt.tag_line("forward", "L['self'].fc", "Linear", "addmm", w, elems=512000, op="addmm")
    assert nt.read_tags(tagged) == [nt.Tag(nt.Layer("fc", "Linear", "forward"), "addmm", w, 512000.0, op="addmm")]
    # a graph-wide constant and a node of no module: their flags read back; neither weighs
    const = nt.read_tags(nt.tag_line("backward", "L['self'].act", "ReLU", "full_default_5", elems=1, const=True))[0]
    loss = nt.read_tags(nt.tag_line("forward", None, None, "amax", elems=2000))[0]
    assert const.const and const.weight == 0 and loss.layer is None and loss.weight == 2000
    assert nt.read_tags(nt.tag_line("forward", None, None, "view_1", elems=9, view=True))[0].weight == 0
    assert ls.innermost_frame(s) == ("timm/models/resnet.py", 153, "x = self.bn2(x)")
    assert ls.computes("convolution_backward_3", "convolution_backward")
    assert not ls.computes("convolution_backward_3", "convolution") and ls.computes("mm", "mm")


WRAPPER = """
def call(self, args):
        # Topologically Sorted Source Nodes: [x, conv], Original ATen: [aten.convolution]
        # [Provenance debug handles] extern_kernels.convolution:1
        buf0 = extern_kernels.convolution(arg0, arg1)
        # Topologically Sorted Source Nodes: [bn, relu], Original ATen: [aten._native_batch_norm_legit, aten.relu]
        # [Provenance debug handles] triton_poi_fused_bn_relu_0:2
        triton_poi_fused_bn_relu_0.run(buf0)
        # [Provenance debug handles] extern_kernels.mm:3
        extern_kernels.mm(buf0, arg2, out=buf1)
        # [Provenance debug handles] triton_poi_fused_add_1:4
        triton_poi_fused_add_1.run(buf1)
"""

STACKS = {
    "extern_kernels.convolution:1": [stack("m.py", 10, "x = self.conv(x)", "forward", "L['self'].conv", "Conv2d", "convolution")],
    "triton_poi_fused_bn_relu_0:2": [stack("m.py", 11, "x = self.bn(x)", "forward", "L['self'].bn", "BatchNorm2d", "add_1"),
                                     stack("m.py", 12, "x = self.act(x)", "forward", "L['self'].act", "ReLU", "relu")],
    # an extern call's site lists the nodes fused into its inputs too: the mm's own is `mm`
    "extern_kernels.mm:3": [stack("m.py", 13, "x = self.fc(x)", "forward", "L['self'].fc", "Linear", "mm"),
                            stack("m.py", 12, "x = self.act(x)", "forward", "L['self'].act", "ReLU", "relu")],
    "triton_poi_fused_add_1:4": [stack("m.py", 14, "x = x + 1", "forward", "L['self']", "Net", "add_2")],
}


def test_launch_sites_come_in_call_order_with_their_layers():
    sites = ls.sites_of(WRAPPER, STACKS)
    assert [(s.kernel, s.handle, s.extern) for s in sites] == [
        ("extern_kernels.convolution", 1, True), ("triton_poi_fused_bn_relu_0", 2, False),
        ("extern_kernels.mm", 3, True), ("triton_poi_fused_add_1", 4, False)]
    assert sites[0].fx_nodes == ("x", "conv") and sites[0].aten_ops == ("aten.convolution",)
    # a fused batch-norm + ReLU kernel names both modules, each with its own line
    assert [la.path for la in sites[1].layers] == ["bn", "act"] and sites[1].layer_sources == ("m.py:11", "m.py:12")
    assert [la.path for la in sites[2].layers] == ["fc"]  # not the ReLU fused into its input
    assert sites[3].layers == (nt.Layer("", "Net", "forward"),)


def k(name: str, start: float, dur: float, cat: str = "kernel") -> Interval:
    return Interval(name, cat, start, dur)


def test_kernels_by_name_and_library_kernels_by_launch_order():
    sites = ls.sites_of(WRAPPER, STACKS)
    events = [k("sm90_xmma_fprop_implicit_gemm", 0, 100), k("triton_poi_fused_bn_relu_0", 100, 40),
              k("nvjet_sm90_hsh_gemm", 140, 60), k("triton_poi_fused_add_1", 200, 10)]
    placed = at.attribute_events(events, [sites], runs=1)
    rows = {(r["module"], r["category"]): r["device_ms"] for r in at.summary(placed)["rows"]}
    assert rows[("conv", "library_mm_conv")] == pytest.approx(0.1)
    assert rows[("bn", "triton_pointwise")] == rows[("act", "triton_pointwise")] == pytest.approx(0.02)  # split evenly
    assert rows[("fc", "library_mm_conv")] == pytest.approx(0.06)
    assert placed.how == pytest.approx({lp.BY_ORDER: 0.16, at.BY_NAME: 0.05})
    assert not placed.unattributed and placed.events[0] == ("conv (Conv2d, forward)", "m.py:10")


def test_a_gemm_under_a_convolution_goes_to_it_and_a_memset_with_no_extern_call_is_counted_not_placed():
    """cuDNN runs a 1x1 convolution as a GEMM (nvjet, cuBLASLt under mixnet_l's pointwise
    convolutions on an H100): with no mm call beside it, the convolution launched it."""
    conv_only = WRAPPER.replace("extern_kernels.mm:3", "extern_kernels.convolution:3")
    stacks = {**STACKS, "extern_kernels.convolution:3": [
        stack("m.py", 13, "x = self.pw(x)", "forward", "L['self'].pw", "Conv2d", "convolution_1")]}
    sites = ls.sites_of(conv_only, stacks)
    events = [k("triton_poi_fused_bn_relu_0", 0, 10), k("nvjet_sm90_hsh_gemm", 10, 30),
              k("cublasLt::splitKreduce_kernel", 40, 5), k("triton_poi_fused_add_1", 50, 10),
              k("Memset (Device)", 60, 2, "gpu_memset"), k("triton_poi_fused_add_1", 70, 10)]
    placed = at.attribute_events(events, [sites], runs=1)
    rows = {r["module"]: r["device_ms"] for r in at.summary(placed)["rows"]}
    assert rows["pw"] == pytest.approx(0.035)
    assert placed.unattributed[at.NO_SITE] == pytest.approx(0.002)
    # a convolution's kernel never goes to an mm call
    mm = ls.Site("extern_kernels.mm", 9, True)
    assert not lp.compatible(k("sm90_xmma_dgrad_implicit_gemm", 0, 1), mm)
    assert lp.compatible(k("aten::mm", 0, 1, "cpu_op"), mm) and not lp.compatible(k("aten::addmm", 0, 1, "cpu_op"), mm)


def test_a_modules_leading_extern_call_and_time_between_graphs():
    fwd = ls.sites_of(WRAPPER, STACKS)
    bwd_src = """
        # [Provenance debug handles] torch.ops.aten.convolution_backward.default:1
        buf = torch.ops.aten.convolution_backward.default(a, b)
        # [Provenance debug handles] triton_red_fused_sum_0:2
        triton_red_fused_sum_0.run(buf)
"""
    bwd = ls.sites_of(bwd_src, {"torch.ops.aten.convolution_backward.default:1": [
        stack("m.py", 10, "x = self.conv(x)", "backward", "L['self'].conv", "Conv2d", "convolution_backward")],
        "triton_red_fused_sum_0:2": [stack("m.py", 10, "x = self.conv(x)", "backward", "L['self'].conv", "Conv2d", "sum_1")]})
    events = [k("aten::ones_like", 0, 5, "cpu_op"),  # the loss's seed, before any graph
              k("aten::convolution", 10, 50, "cpu_op"), k("triton_poi_fused_bn_relu_0", 60, 10),
              k("aten::mm", 70, 20, "cpu_op"), k("triton_poi_fused_add_1", 90, 5),
              k("aten::sum", 100, 7, "cpu_op"),  # eager code between the forward and the backward
              k("aten::convolution_backward", 110, 80, "cpu_op"), k("triton_red_fused_sum_0", 190, 10)]
    placed = at.attribute_events(events, [fwd, bwd], runs=1)
    assert placed.unattributed == pytest.approx({at.OUTSIDE: 0.012})
    rows = mr.rollup(at.summary(placed)["rows"])  # by module and pass, categories together
    assert rows[("conv", "backward")] == pytest.approx(0.09) and rows[("conv", "forward")] == pytest.approx(0.05)


def test_a_kernel_launched_from_two_sites_follows_the_sequence():
    """Inductor launches one kernel from each site whose code is identical: each launch
    goes to the site that continues the launches before it."""
    src = """
        # [Provenance debug handles] triton_poi_fused_relu_0:1
        # [Provenance debug handles] triton_poi_fused_add_1:2
        # [Provenance debug handles] triton_poi_fused_relu_0:3
"""
    stacks = {f"triton_poi_fused_relu_0:{h}": [stack("m.py", h, "x", "forward", f"L['self'].act{h}", "ReLU", "relu")]
              for h in (1, 3)}
    sites = ls.sites_of(src, stacks)
    events = [k("triton_poi_fused_relu_0", 0, 10), k("triton_poi_fused_add_1", 10, 1), k("triton_poi_fused_relu_0", 20, 30)]
    rows = {r["module"]: r["device_ms"] for r in at.summary(at.attribute_events(events, [sites], 1))["rows"]}
    assert rows == pytest.approx({"act1": 0.01, "act3": 0.03})


def test_the_summary_is_scaled_to_the_breakdown_and_fills_the_kernel_columns():
    sites = ls.sites_of(WRAPPER, STACKS)
    events = [k("aten::convolution", 0, 100, "cpu_op"), k("triton_poi_fused_bn_relu_0", 100, 100)]
    breakdown = {"runs": 2, "device_ms": 0.05,  # the profiled 0.1 ms a run, scaled to the unprofiled run
                 "kernels": [{"name": "aten::convolution"}, {"name": "triton_poi_fused_bn_relu_0"}, {"name": "x"}]}
    summary, _ = at.model_code(events, [sites], breakdown)
    assert summary["attributed_ms"] == pytest.approx(0.05) and summary["attributed_pct"] == pytest.approx(100)
    assert sum(r["device_ms"] for r in summary["rows"]) == pytest.approx(0.05)
    assert breakdown["kernels"][0]["model_modules"] == ["conv (Conv2d, forward)"]
    assert breakdown["kernels"][0]["model_aten"] == ["aten.convolution"] and breakdown["kernels"][0]["model_how"] == lp.BY_ORDER
    assert breakdown["kernels"][1]["model_how"] == at.BY_NAME
    assert breakdown["kernels"][0]["model_source"] == "m.py:10"
    assert breakdown["kernels"][1]["model_modules"] == ["bn (BatchNorm2d, forward)", "act (ReLU, forward)"]
    assert breakdown["kernels"][2]["model_modules"] is None


def tagged(file_line: int, code: str, pass_: str, path: str | None, cls: str | None, node: str, **tag) -> str:
    return (f'  File "/venv/lib/python3.12/site-packages/timm/models/resnet.py", line {file_line}, in forward\n'
            f'    {code}\n' + nt.tag_line(pass_, path, cls, node, **tag))


BACKWARD = """
def call(self, args):
        # [Provenance debug handles] cpp_fused_native_batch_norm_backward_threshold_backward_convolution_backward_0:1
        cpp_fused_0(buf0)
        # Topologically Sorted Source Nodes: [mul_1, convolution_backward], Original ATen: [aten.convolution_backward]
        # [Provenance debug handles] torch.ops.aten.convolution_backward.default:2
        buf1 = torch.ops.aten.convolution_backward.default(buf0)
        # Topologically Sorted Source Nodes: [convolution_backward_1], Original ATen: [aten.convolution_backward]
        # [Provenance debug handles] torch.ops.aten.convolution_backward.default:3
        buf2 = torch.ops.aten.convolution_backward.default(buf0)
        # [Provenance debug handles] cpp_fused_threshold_backward_1:4
        cpp_fused_1(buf2)
"""

BACKWARD_STACKS = {
    # ReLU-then-batch-norm backward of layer4.0, feeding the two convolutions' backward; its
    # origins also list the graph's one `0` of every ReLU backward (made first by the
    # model's last ReLU) and the convolution_backward it feeds
    "cpp_fused_native_batch_norm_backward_threshold_backward_convolution_backward_0:1": [
        tagged(150, "x = self.act2(x)", "backward", "L['self'].layer4[1].act2", "ReLU", "full_default_5", elems=1,
               const=True),
        tagged(144, "x = self.act1(x)", "backward", "L['self'].layer4[0].act1", "ReLU", "where_3", elems=8192),
        tagged(145, "x = self.bn1(x)", "backward", "L['self'].layer4[0].bn1", "BatchNorm2d", "mul_1", elems=8192),
        tagged(145, "x = self.bn1(x)", "backward", "L['self'].layer4[0].bn1", "BatchNorm2d", "sum_2", elems=8192),
        tagged(145, "x = self.bn1(x)", "backward", "L['self'].layer4[0].bn1", "BatchNorm2d", "view_3", elems=8192,
               view=True),
        tagged(146, "x = self.conv1(x)", "backward", "L['self'].layer4[0].conv1", "Conv2d", "convolution_backward")],
    "torch.ops.aten.convolution_backward.default:2": [
        tagged(146, "x = self.conv1(x)", "backward", "L['self'].layer4[0].conv1", "Conv2d", "convolution_backward"),
        tagged(145, "x = self.bn1(x)", "backward", "L['self'].layer4[0].bn1", "BatchNorm2d", "mul_1")],
    "torch.ops.aten.convolution_backward.default:3": [
        tagged(162, "shortcut = self.downsample(x)", "backward", "L['self'].layer4[0].downsample[0]", "Conv2d",
               "convolution_backward_1")],
    # the weight-gradient cast of layer3's conv (a small node) fused with a large loss-side
    # node of no module
    "cpp_fused_threshold_backward_1:4": [
        tagged(146, "x = self.conv1(x)", "backward", "L['self'].layer3[1].conv1", "Conv2d", "convert_element_type_9",
               elems=100),
        tagged(777, "x = self.act1(x)", "backward", "L['self'].act1", "ReLU", "where_9", elems=9900),
        tagged(10, "loss = f(x)", "backward", None, None, "add_7", elems=10000)],
}


def test_a_generated_kernel_names_only_the_modules_of_the_nodes_it_computes():
    """resnet18's layer4.1.act2 was named in every ReLU-backward kernel (the graph's one
    `0`, made by its backward first); a kernel making a convolution's input named that
    convolution too. Neither computes a node of those modules."""
    sites = ls.sites_of(BACKWARD, BACKWARD_STACKS)
    fused = sites[0]
    assert [la.path for la in fused.layers] == ["layer4.0.bn1", "layer4.0.act1"]  # heaviest first
    assert fused.layer_shares() == pytest.approx((2 / 3, 1 / 3))  # by elements; the view weighs nothing
    assert fused.sources[0] == "timm/models/resnet.py:145" and fused.layer_sources == ("timm/models/resnet.py:145",
                                                                                         "timm/models/resnet.py:144")
    # an extern call keeps its own node only
    assert [la.path for la in sites[1].layers] == ["layer4.0.conv1"]
    # the share of a node of no module is not given to the modules beside it
    last = sites[3]
    assert [la.path for la in last.layers] == ["act1", "layer3.1.conv1"]
    assert last.layer_shares() == pytest.approx((0.495, 0.005))
    events = [k("graph_0_cpp_fused_threshold_backward_1", 0, 1000, "cpu_op")]
    placed = at.attribute_events(events, [sites], runs=1)
    assert placed.unattributed == pytest.approx({at.NO_MODULE: 0.5})
    rows = {r["module"]: r for r in at.summary(placed)["rows"]}
    assert rows["layer3.1.conv1"]["device_ms"] == pytest.approx(0.005)
    assert rows["layer3.1.conv1"]["launches"] == pytest.approx(0.005)


def test_adjacent_library_calls_get_their_own_times():
    """resnet18's layer4.0.downsample.0 and layer4.0.conv1 backward, one after the other
    with no generated kernel between: on a CPU each op is its own call, in call order."""
    sites = ls.sites_of(BACKWARD, BACKWARD_STACKS)
    events = [k("graph_0_cpp_fused_native_batch_norm_backward_threshold_backward_convolution_backward_0", 0, 10, "cpu_op"),
              k("aten::convolution_backward", 10, 64500, "cpu_op"), k("aten::convolution_backward", 64600, 370, "cpu_op"),
              k("graph_0_cpp_fused_threshold_backward_1", 65000, 10, "cpu_op")]
    placed = at.attribute_events(events, [sites], runs=1)
    rows = {r["module"]: r["device_ms"] for r in at.summary(placed)["rows"] if r["category"] != "cpp_kernel"}
    assert rows == pytest.approx({"layer4.0.conv1": 64.5, "layer4.0.downsample.0": 0.37})
    assert placed.how[lp.BY_LINK] == pytest.approx(64.87)


def test_a_gpus_library_kernels_go_to_the_call_that_launched_them():
    sites = ls.sites_of(BACKWARD, BACKWARD_STACKS)
    bn = k("cpp_fused_native_batch_norm_backward_threshold_backward_convolution_backward_0", 0, 10)
    relu = k("cpp_fused_threshold_backward_1", 1000, 10)
    gap = [k("dgrad2d_c1_k1_nhwc", 10, 300), k("wgrad2d_c1_k1_nhwc", 310, 200), k("Memset (Device)", 510, 1, "gpu_memset"),
           k("sm90_xmma_dgrad_implicit_gemm", 511, 30), k("sm80_xmma_wgrad_implicit_gemm", 541, 9)]
    conv1, down = ("aten::convolution_backward", 5.0), ("aten::convolution_backward", 9.0)
    # linked: each kernel to the op that launched it (here the memset is the second call's)
    linked = at.attribute_events([bn, *gap, relu], [sites], 1, links=[None, conv1, conv1, down, down, down, None])
    rows = mr.rollup(at.summary(linked)["rows"])
    assert rows[("layer4.0.conv1", "backward")] == pytest.approx(0.5)
    assert rows[("layer4.0.downsample.0", "backward")] == pytest.approx(0.04)
    # without links: two main kernels a call, cut in call order (the memset with the kernel before it)
    by_kind = at.attribute_events([bn, *gap, relu], [sites], 1)
    assert by_kind.how[lp.BY_KIND] == pytest.approx(0.54)
    rows = mr.rollup(at.summary(by_kind)["rows"])
    assert rows[("layer4.0.conv1", "backward")] == pytest.approx(0.501)
    assert rows[("layer4.0.downsample.0", "backward")] == pytest.approx(0.039)
    # three main kernels for two calls: nothing tells them apart, they are shared and said so
    odd = at.attribute_events([bn, *gap[:4], relu], [sites], 1)
    assert odd.how[lp.BY_ORDER_SHARED] == pytest.approx(0.531)
    # a kernel whose op is no call of the gap (a zero_ between two calls) goes nowhere
    fill = k("void at::native::vectorized_elementwise_kernel<fill>", 505, 2)
    placed = at.attribute_events([bn, gap[0], fill, gap[3], relu], [sites], 1,
                                 links=[None, conv1, ("aten::zero_", 7.0), down, None])
    assert placed.unattributed[at.NO_SITE] == pytest.approx(0.002)


def test_a_library_kernels_line_is_its_costliest_sites():
    """One cuDNN kernel launched by two convolutions: the kernel table's line is the one
    of the call that spent the most on it, not the first."""
    sites = ls.sites_of(BACKWARD, BACKWARD_STACKS)
    events = [k("graph_0_cpp_fused_native_batch_norm_backward_threshold_backward_convolution_backward_0", 0, 10, "cpu_op"),
              k("aten::convolution_backward", 10, 100, "cpu_op"), k("aten::convolution_backward", 110, 900, "cpu_op"),
              k("graph_0_cpp_fused_threshold_backward_1", 1100, 10, "cpu_op")]
    placed = at.attribute_events(events, [sites], runs=1)
    rows = [{"name": "aten::convolution_backward"}]
    at.kernel_columns(placed, rows)
    assert rows[0]["model_source"] == "timm/models/resnet.py:162"
    assert rows[0]["model_modules"] == ["layer4.0.downsample.0 (Conv2d, backward)", "layer4.0.conv1 (Conv2d, backward)"]


BREAK = """Graph break in user code at /work/tests/net.py:31
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Unsupported Tensor.item() call with capture_scalar_outputs=False
  Explanation: Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.

User code traceback:
  File "/work/tests/net.py", line 31, in forward
    if x.sum().item() > 0:

Traceback (most recent call last):
  File "/venv/lib/python3.12/site-packages/torch/_dynamo/symbolic_convert.py", line 1105, in wrapper
"""


def test_a_graph_break_report_reads_as_its_reason_and_line():
    assert graph_break(BREAK) == {"reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
                                  "at": "/work/tests/net.py:31", "code": "if x.sum().item() > 0:"}
    assert graph_breaks([BREAK, BREAK]) == [{**graph_break(BREAK), "times": 2}]


@pytest.mark.slow
def test_a_real_compile_tags_its_kernels_and_reports_its_graph_break(tmp_path, monkeypatch):
    """A small module of the tests' own, compiled for real on the CPU with the job's
    provenance pass and capture: each captured module's kernels name the layers they
    compute, and the graph break names its reason and source line."""
    import inspect

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    torch = pytest.importorskip("torch")
    from torch import nn

    from tasks import provenance
    from tasks.capture import ModuleCapture

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.bn = nn.BatchNorm2d(8)
            self.act = nn.ReLU()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            x = self.act(self.bn(self.conv(x)))
            if x.sum().item() > 0:  # data-dependent: a graph break
                x = x * 2
            return self.fc(x.mean((2, 3)))

    torch._dynamo.reset()
    with torch._inductor.config.patch(post_grad_custom_pre_pass=None, fx_graph_cache=False):
        assert provenance.install() == "installed"
        net = Net()
        compiled = torch.compile(net)
        with ModuleCapture() as capture:
            compiled(torch.randn(2, 3, 8, 8)).sum().backward()
    torch._dynamo.reset()
    assert len(capture.modules) >= 4  # forward and backward on each side of the break
    known = {name for name, _ in net.named_modules()}
    layers = set()
    works = {}
    for m in capture.modules:
        assert m.stack_traces, m.label()
        for site in ls.with_known_paths(ls.sites_of(open(m.path).read(), m.stack_traces), known):
            layers |= {(la.path, la.cls, la.pass_) for la in site.layers}
            if site.extern and ls.extern_op(site.kernel).startswith("convolution"):
                assert [la.path for la in site.layers] == ["conv"], site
            if site.extern:
                works[(ls.extern_op(site.kernel), site.layers[0].pass_ if site.layers else None)] = site.work
    # each extern call carries the work of its op, by hand: the conv's output is 2x8x6x6, each
    # element 3x3x3 multiply-adds; its backward computes the weight's gradient only (the input
    # needs none): as many; the fc (addmm, 2x8 by 8x4) 2x8x4 multiply-adds
    conv = 2 * (2 * 8 * 6 * 6) * (3 * 3 * 3)
    assert works[("convolution", "forward")] == nt.Work(conv, 4 * (2 * 3 * 8 * 8 + 8 * 3 * 3 * 3 + 8 + 2 * 8 * 6 * 6),
                                                        "float32")
    assert works[("convolution_backward", "backward")].flops == conv
    assert works[("addmm", "forward")].flops == 2 * 2 * 8 * 4
    assert {("conv", "Conv2d", "forward"), ("conv", "Conv2d", "backward"), ("fc", "Linear", "forward"),
            ("bn", "BatchNorm2d", "forward"), ("act", "ReLU", "forward")} <= layers
    (brk,) = graph_breaks(capture.graph_breaks)
    line = inspect.getsourcelines(Net.forward)[1] + 2
    assert brk["at"].endswith(f"test_attribution.py:{line}") and "item()" in brk["reason"] and "item()" in brk["code"]


def test_where_in_model_names_the_block_its_costliest_layer_and_its_line():
    from sweeper.reporting.model_code import block_depth, module_pairs, where_in_model

    rows = [("features.conv0", "Conv2d", "forward", 1.0), ("features.denseblock1.layer1.conv", "Conv2d", "backward", 2.0),
            ("features.denseblock2.layer1.conv", "Conv2d", "backward", 5.0),
            ("features.denseblock2.layer2.norm", "BatchNorm2d", "forward", 1.0), ("classifier", "Linear", "forward", 2.0)]
    modules = pd.DataFrame([{"job": j, "label": f"net {j}", "module": m, "class": c, "pass": p,
                             "category": "library_mm_conv", "device_ms": ms * (0.5 if j == 1 else 1.0),
                             "launches": 1.0, "source": "timm/models/densenet.py:105"}
                            for j in (0, 1) for m, c, p, ms in rows])
    assert block_depth(modules[modules["job"] == 0]) == 2  # `features` holds 82%: its blocks are read
    jobs = pd.DataFrame([{"job": j, "label": f"net {j}", "status": "ok", "gpu": "H100", "device_ms": 11.0 / (j + 1),
                          "model_code_pct": 99.0, "outside_graphs_ms": 0.0, "graph_breaks": 0,
                          "key": f"model=net,autotune={'on' if j else 'off'}", "autotune": bool(j), "model": "net"}
                         for j in (0, 1)])
    kernels = pd.DataFrame([{"job": 0, "scope": "step", "kernel": "sm90_xmma_wgrad", "device_ms": 5.0,
                             "model_modules": "features.denseblock2.layer1.conv (Conv2d, backward)"}])
    (first, _) = where_in_model(jobs, modules, kernels)
    assert first.text.startswith("net 0: 55% of its GPU time a step (6.00 ms) is in features.denseblock2 "
                                 "(forward 9%, backward 45%); its costliest layer, features.denseblock2.layer1.conv "
                                 "(Conv2d, backward, called at timm/models/densenet.py:105), takes 5.00 ms"), first.text
    assert "sm90_xmma_wgrad" in first.text and "99% of the kernel time inside compiled graphs" in first.text
    (pair,) = module_pairs(jobs, modules)
    assert pair.text.startswith("max-autotune on net 0: saved 2.50 ms a step in features.denseblock2 backward"), pair.text


def test_a_compare_names_the_model_modules_of_the_kernels_that_moved():
    from sweeper.analysis.kernel_diff import kernel_diffs

    def table(job, ms):
        return pd.DataFrame([{"job": job, "scope": "step", "kernel": "sm90_xmma_dgrad", "category": "library_mm_conv",
                              "device_ms": ms, "share_pct": 50.0, "source": None,
                              "model_modules": "features.denseblock4.denselayer1.conv2 (Conv2d, backward); +15 more"}])

    diff = kernel_diffs(table(0, 1.0), table(1, 1.5), {"k": (0, 1)})["k"]
    assert diff["change"].tolist() == ["slower"]
    assert mr.modules_said(diff["model_modules"].iloc[0]) == \
        "features.denseblock4.denselayer1.conv2 (Conv2d, backward) and 15 more"
    assert mr.modules_said("a (X, forward); b (Y, forward); c (Z, forward)") == "a (X, forward); b (Y, forward) and 1 more"
    assert mr.modules_said(None) is None


def test_real_h100_records_read_as_time_by_model_code(tmp_path):
    """The records of mixnet_l b128 and densenet121 b16 training on an H100 (fixtures): the
    sweep's modules table, its first findings and its modules figure."""
    import gzip
    import json
    from pathlib import Path

    from sweeper.aggregate import aggregate

    fixtures = Path(__file__).parent / "fixtures" / "h100" / "model_code"
    for job in (0, 1):
        (tmp_path / str(job)).mkdir()
        record = json.loads(gzip.open(fixtures / f"result_{job}.json.gz").read())
        (tmp_path / str(job) / "result.json").write_text(json.dumps(record))
    report = aggregate(tmp_path).read_text()
    modules = pd.read_csv(tmp_path / "tables" / "modules.csv")
    jobs = pd.read_csv(tmp_path / "tables" / "jobs.csv").set_index("model")
    assert jobs.loc["mixnet_l", "model_code_pct"] > 99.9 and jobs.loc["densenet121", "model_code_pct"] > 99.8
    assert (jobs["accuracy"] == "passed").all() and (jobs["graph_breaks"] == 0).all()
    # every step millisecond placed is in the table, a layer's time in each block that holds it
    assert set(modules.loc[modules["module"] == "(outside compiled graphs)", "pass"]) == {"step"}
    for job, rows in modules[modules["module"] != "(outside compiled graphs)"].groupby("job"):
        placed = json.loads(gzip.open(fixtures / f"result_{job}.json.gz").read())["model_code"]["attributed_ms"]
        assert rows["device_ms"].sum() == pytest.approx(placed, rel=1e-3)
    assert "mixnet_l b128 train fp16: 28% of its GPU time a step (18.2 ms) is in blocks.2 " in report
    assert "its costliest layer, blocks.2.0.conv_dw.3 (Conv2d, backward" in report
    assert "densenet121 b16 train fp16: 31% of its GPU time a step (2.75 ms) is in features.denseblock3 " in report
    assert (tmp_path / "figures" / "modules.png").exists()


def test_a_decompositions_nodes_take_the_module_of_their_call():
    """SiLU's backward decomposes into sigmoid, mul, sub and add nodes that keep the stack
    trace of the call but lose its module stack: each takes the module of a neighbour of the
    very same stack trace that has one; a node of another call (the loss) stays of no module."""
    import torch
    import torch.fx as fx

    from tasks.provenance import _same_call_modules

    g = fx.Graph()
    x = g.placeholder("x")
    act_stack = {"L__self___act": ("L['self'].blocks[0].act", "SiLU")}
    call = 'File "timm/models/x.py", line 81, in forward\n    x = self.act(x)\n'
    cast = g.call_function(torch.ops.aten.sigmoid.default, (x,))
    cast.meta.update(stack_trace=call, fwd_nn_module_stack=act_stack)
    sig = g.call_function(torch.ops.aten.sigmoid.default, (cast,))
    mul = g.call_function(torch.ops.aten.mul.Tensor, (sig, cast))
    loss = g.call_function(torch.ops.aten.neg.default, (mul,))
    for n in (sig, mul):
        n.meta["stack_trace"] = call
    loss.meta["stack_trace"] = 'File "bench.py", line 5, in forward\n    return F.cross_entropy(out, y)\n'
    got = _same_call_modules(g)
    assert got == {sig: act_stack, mul: act_stack}


@pytest.mark.slow
def test_a_gradient_addition_keeps_the_modules_upstream_of_it(tmp_path, monkeypatch):
    """timm's resnet18 compiled for real (training, CPU): autograd's "Gradient addition node"
    stack trace ends without a newline, the tag was appended to that line and not read, and
    the walk from the kernel's stored values stopped there. The kernel that adds a block's
    two input gradients applies the next block's last ReLU mask (the skip's gradient): it
    named the block's own modules, not that ReLU (issue on attribution with no blind spots)."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    torch = pytest.importorskip("torch")
    timm = pytest.importorskip("timm")

    from tasks import provenance
    from tasks.capture import ModuleCapture

    torch._dynamo.reset()
    with torch._inductor.config.patch(post_grad_custom_pre_pass=None, fx_graph_cache=False):
        assert provenance.install() == "installed"
        net = timm.create_model("resnet18", num_classes=10)
        with ModuleCapture() as capture:
            torch.compile(net)(torch.randn(2, 3, 32, 32)).sum().backward()
    torch._dynamo.reset()
    known = {name for name, _ in net.named_modules()}
    named = [{la.path for la in site.layers if la.pass_ == "backward"}
             for m in capture.modules if m.label().startswith("backward")
             for site in ls.with_known_paths(ls.sites_of(open(m.path).read(), m.stack_traces), known)
             if not site.extern]
    for layer in ("layer1", "layer2", "layer3", "layer4"):
        adds = [n for n in named if f"{layer}.0.act2" in n and f"{layer}.0.bn2" in n and f"{layer}.1.bn2" not in n]
        assert adds and all(f"{layer}.1.act2" in n for n in adds), (layer, adds)


def test_a_tag_after_a_gradient_addition_line_is_read():
    """Records written before the tag started a line of its own: read all the same."""
    line = ("File \"timm/models/resnet.py\", line 98, in forward\n    x += shortcut\n"
            "Gradient addition node due to multiple use of tensor around:"
            + nt.tag_line("backward", None, None, "add_2", elems=1024, op="add", inputs=("where", "getitem_3")))
    (tag,) = nt.read_tags(line)
    assert tag.node == "add_2" and tag.inputs == ("where", "getitem_3") and tag.layer is None


def test_a_module_whose_nodes_are_only_views_is_not_named_beside_those_that_work():
    """A module whose only nodes in a kernel are views did none of its work: it showed in
    kernel labels at 0 ms (issue on attribution with no blind spots, item 7)."""
    stacks = {"cpp_fused_relu_0:1": [
        "File \"m.py\", line 3, in forward\n" + nt.tag_line("forward", "L['self'].act", "ReLU", "relu", elems=64, op="relu"),
        "File \"m.py\", line 4, in forward\n" + nt.tag_line("forward", "L['self'].flat", "Flatten", "view", elems=64,
                                                             view=True, op="view", inputs=("relu",))]}
    (site,) = ls.sites_of("# [Provenance debug handles] cpp_fused_relu_0:1\n", stacks)
    assert [la.path for la in site.layers] == ["act"] and site.layer_shares() == pytest.approx((1.0,))
    only_views = {"cpp_fused_relu_0:1": stacks["cpp_fused_relu_0:1"][1:]}
    (alone,) = ls.sites_of("# [Provenance debug handles] cpp_fused_relu_0:1\n", only_views)
    assert [la.path for la in alone.layers] == ["flat"]  # nothing else here: the view's module stays


def test_a_cpus_matmul_peak_reads_as_its_value_not_zero():
    from sweeper.reporting.job_columns import roofline_columns

    got = roofline_columns({"roofline": {"roofs": {"matmul_tflops": {"float32": 0.0412, "bfloat16": 806.84}}}})
    assert got["matmul_tflops"] == "float32 0.0412, bfloat16 806.8"


@pytest.mark.slow
def test_a_fused_kernels_time_is_split_by_what_its_nodes_cost(tmp_path, monkeypatch):
    """A kernel fusing lgamma with eight multiply-adds gave lgamma's module 5% of its time by
    elements; timed apart it is about 68% (issue on attribution with no blind spots, item 3).
    By cost (sweeper/analysis/op_costs.py) most of it goes to lgamma's module."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    torch = pytest.importorskip("torch")
    from torch import nn

    from tasks import provenance
    from tasks.capture import ModuleCapture

    class Lgamma(nn.Module):
        def forward(self, x):
            return torch.lgamma(x)

    class MultiplyAdds(nn.Module):
        def forward(self, x):
            for i in range(8):  # no factor of 1: Inductor drops `x * 1` and gives its module to x's node
                x = x * (1.01 + 0.01 * i) + 0.1
            return x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lgamma, self.madds = Lgamma(), MultiplyAdds()

        def forward(self, x):
            return self.madds(self.lgamma(x))

    torch._dynamo.reset()
    with torch._inductor.config.patch(post_grad_custom_pre_pass=None, fx_graph_cache=False):
        assert provenance.install() == "installed"
        net = Net()
        with ModuleCapture() as capture, torch.no_grad():
            torch.compile(net)(torch.rand(4096) + 0.5)
    torch._dynamo.reset()
    known = {name for name, _ in net.named_modules()}
    (site,) = [s for m in capture.modules
               for s in ls.with_known_paths(ls.sites_of(open(m.path).read(), m.stack_traces), known) if not s.extern]
    shares = dict(zip([la.path for la in site.layers], site.layer_shares()))
    assert shares["lgamma"] == pytest.approx(32 / (32 + 16), abs=0.02), shares  # 8 multiplies, 8 adds
