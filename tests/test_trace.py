import gzip
import json

import pytest

from sweeper.analysis import trace as tr


def test_union_counts_overlaps_once():
    assert tr.union_us([]) == 0
    assert tr.union_us([(0, 10), (5, 15), (20, 30)]) == 25
    assert tr.union_us([(0, 10), (2, 3), (10, 12)]) == 12


def test_clip_cuts_to_span():
    ivs = [tr.Interval("a", "kernel", 0, 10), tr.Interval("b", "kernel", 8, 10), tr.Interval("c", "kernel", 30, 1)]
    assert tr.clip(ivs, 5, 20) == [(5, 10), (8, 18)]


def test_cpu_kernels_keep_outermost_op_per_thread():
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::convolution", "ts": 0, "dur": 100, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::_convolution", "ts": 1, "dur": 98, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mkldnn_convolution", "ts": 2, "dur": 96, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "graph_0_cpp_fused_relu_1", "ts": 100, "dur": 20, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: X", "ts": 130, "dur": 50, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "ts": 131, "dur": 10, "tid": 1},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 5, "dur": 10, "tid": 2},
        {"ph": "X", "cat": "user_annotation", "name": "sweeper.step", "ts": 0, "dur": 200, "tid": 1},
    ]
    names = [k.name for k in tr.cpu_kernels(events)]
    assert names == ["aten::convolution", "aten::mm", "graph_0_cpp_fused_relu_1", "aten::add_"]


def test_real_gpu_trace_loads(h200):
    events = tr.load_trace(h200 / "resnet18_forward_0_trace.json.gz")
    kernels = tr.device_kernels(events)
    assert kernels and all(k.cat in tr.DEVICE_CATS for k in kernels)
    assert kernels == sorted(kernels, key=lambda k: k.start_us)


def test_corrupt_trace_names_the_file(tmp_path):
    bad = tmp_path / "t.json.gz"
    with gzip.open(bad, "wt") as f:
        f.write('{"traceEvents": [')
    with pytest.raises(tr.TraceError, match=str(bad)):
        tr.load_trace(bad)
    notrace = tmp_path / "n.json"
    notrace.write_text(json.dumps({"foo": 1}))
    with pytest.raises(tr.TraceError, match="traceEvents"):
        tr.load_trace(notrace)
