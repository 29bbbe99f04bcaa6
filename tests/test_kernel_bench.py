"""Kernel selection and the byte/bandwidth arithmetic, on real H200 kernel files and records."""

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_text

from sweeper.analysis import kernels as mb
from sweeper.analysis.module_source import kernel_definitions

H200 = Path(__file__).parent / "fixtures" / "h200"
ROOT = Path(__file__).resolve().parent.parent


def record(name):
    return json.loads(gzip.decompress((H200 / "two_gpu_sweeps" / f"{name}.result.json.gz").read_bytes()))


@pytest.mark.parametrize("kind, gb", [("poi", 0.006432768), ("red", 0.002469888), ("per", 0.00012852)])
def test_bytes_moved_agree_with_the_kernels_own_estimate(kind, gb):
    source = (H200 / f"triton_{kind}.py").read_text()
    assert mb.kernel_num_gb(source) == gb
    # the same figure from the get_args() tensors: each read once, in_out_ptr written back
    assert mb.args_bytes(source) == round(gb * 1e9)


def test_pointwise_bytes_by_hand():
    source = (H200 / "triton_poi.py").read_text()
    big = 32 * 512 * 7 * 7 * 2  # an fp16 activation (channels-last strides, dense)
    small = 512 * 4  # an fp32 per-channel vector
    # 3 activations read (one of them in_out_ptr0, also written) + 5 per-channel vectors
    assert mb.args_bytes(source) == 3 * big + 5 * small + big


def test_default_selection_covers_80_percent_of_mixnet_triton_time():
    rec = record("mixnet_l")
    rows = mb.select_kernels(rec)
    triton_ms = sum(k["device_ms"] for k in rec["step"]["kernels"] if k["category"].startswith("triton_"))
    assert sum(r["step_ms"] for r in rows) / triton_ms * 100 >= 80.0
    assert rows[-1]["cumulative_pct"] >= 80.0 > rows[-2]["cumulative_pct"]  # no more than needed
    assert len(rows) == 109 and len(rows) <= mb.DEFAULT_MAX_KERNELS
    assert [r["step_ms"] for r in rows] == sorted((r["step_ms"] for r in rows), reverse=True)
    assert all(r["category"].startswith("triton_") for r in rows)
    # each selected kernel is found in a module's breakdown (forward or backward)
    assert {r["module"] for r in rows} <= {"forward_0", "backward_1"} and all(r["module"] for r in rows)
    assert len(mb.select_kernels(rec, cover_pct=50, max_kernels=10)) == 10


def test_bandwidth_and_headroom_arithmetic():
    assert mb.copy_bandwidth_gbps(2**30, 0.5) == pytest.approx(2 * 2**30 / 0.0005 / 1e9)
    row = mb.bandwidth(ms=0.01, num_gb=0.006432768, peak_gbps=4000.0)
    assert row["gb_per_s"] == pytest.approx(643.2768) and row["pct_of_peak_bandwidth"] == pytest.approx(16.08192)
    assert mb.bandwidth(ms=0.01, num_gb=None, peak_gbps=4000.0) == {"gb_per_s": None, "pct_of_peak_bandwidth": None}
    assert mb.headroom_pct(chosen_ms=0.020, best_ms=0.015) == pytest.approx(25.0)
    assert mb.headroom_pct(chosen_ms=None, best_ms=0.015) is None


def test_headroom_estimate_scales_the_seconds_per_config_so_far():
    assert mb.headroom_estimate_s(0.0, 0, 7) == 0.0  # nothing timed yet: nothing to go by
    assert mb.headroom_estimate_s(3.0, 12, None) == 0.0  # a row without a config count
    # 3 s for 12 configs so far (chosen ones included): a kernel of 7 candidates and its
    # chosen config, 8 timings, at 0.25 s each
    assert mb.headroom_estimate_s(3.0, 12, 7) == pytest.approx(2.0)
    assert mb.headroom_estimate_s(3.0, 12, 2) < mb.headroom_estimate_s(3.0, 12, 7)


def test_cpu_rows_say_there_is_no_standalone_benchmark():
    rec = {"step": {"kernels": [
        {"name": "graph_0_cpp_fused_add_0", "category": "cpp_kernel", "device_ms": 3.0, "count": 1},
        {"name": "aten::mkldnn_convolution", "category": "library_mm_conv", "device_ms": 9.0, "count": 4},
        {"name": "graph_0_cpp_fused_relu_1", "category": "cpp_kernel", "device_ms": 1.0, "count": 2}]}}
    rows = mb.cpu_kernel_rows(rec)
    assert [r["name"] for r in rows] == ["graph_0_cpp_fused_add_0", "graph_0_cpp_fused_relu_1"]
    assert rows[0]["share_of_cpp_pct"] == 75.0 and rows[0]["standalone_ms"] is None
    assert "need a GPU" in rows[0]["method"]


# In a job process with its own Inductor cache: the kernel files of the compiled modules given.
KERNEL_FILES = r"""
import json, sys
from types import SimpleNamespace
from tasks.kernel_table import kernel_files
print(json.dumps(kernel_files([SimpleNamespace(path=p) for p in sys.argv[1:]])))
"""


def test_kernel_files_missing_here_are_written_again_from_the_wrapper(tmp_path):
    """A compile loaded from the compile store names its kernel files in the cache of the run
    that compiled it; on an H200 that run's scratch folder was gone, and every
    microbenchmark of the warm jobs failed (FileNotFoundError). Here the H200 modules' kernel
    paths do not exist either: each file is written again from the wrapper's inline source,
    under the name Inductor gives that source (so the very kernel the H200 compiled), in this
    process's cache; a path that exists is kept."""
    wrappers = []
    for name in ("resnet18_forward_0", "resnet18_backward_1"):
        wrappers.append(tmp_path / f"{name}.py")
        wrappers[-1].write_text(read_text(H200 / f"{name}.py.gz"))
    named = {n: p for w in wrappers for n, p in kernel_definitions(w.read_text()).items() if n.startswith("triton_")}
    assert len(named) > 20 and not any(Path(p).exists() for p in named.values())
    kept_name, kept_path = next(iter(named.items()))  # one kernel whose file is here: left as it is
    here = tmp_path / "here" / Path(kept_path).name
    here.parent.mkdir()
    here.write_text("# the file the module names\n")
    wrappers[0].write_text(wrappers[0].read_text().replace(kept_path, str(here)))

    cache = tmp_path / "cache"
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", KERNEL_FILES, *map(str, wrappers)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout.splitlines()[-1])

    assert set(files) == set(named) and files[kept_name] == str(here)
    for name, file in files.items():
        if name == kept_name:
            continue
        assert Path(file).is_file() and Path(file).is_relative_to(cache), name
        assert Path(file).name == Path(named[name]).name, name  # Inductor's name for the source: the same kernel
    # the kernel files captured on the H200 are what was written
    for kind in ("triton_poi", "triton_red", "triton_per"):
        captured = (H200 / f"{kind}.py").read_text().strip()
        assert any(Path(f).read_text().strip() == captured for n, f in files.items() if n != kept_name), kind


def test_the_microbench_line_says_what_failed():
    rows = [{"standalone_ms": 0.1}, {"standalone_ms": None, "error": "FileNotFoundError: gone"},
            {"standalone_ms": None, "error": "not measured: past the microbenchmark budget (11 s)"}]
    ran = {"rows": rows, "peak_bandwidth_gbps": 4250.0}
    assert mb.microbench_outcome(ran) == (
        "microbenchmarks: 1 of 3 kernels timed alone; 1 failed, the first: FileNotFoundError: gone")
    assert mb.microbench_outcome({**ran, "rows": rows[:1]}) == "microbenchmarks: 1 of 1 kernels timed alone"
    whole = {"rows": [{"standalone_ms": None}] * 2, "error": "microbenchmarks failed: RuntimeError: x"}
    assert mb.microbench_failures(whole) == ["microbenchmarks failed: RuntimeError: x"] * 2
    assert mb.microbench_failures({"rows": rows[:1]}) is None  # the phase did not run


def test_a_kernel_file_that_cannot_be_written_again_keeps_its_path(tmp_path):
    """A module that cannot be read back as Python (here cut short) leaves the named path,
    so the kernel's row says FileNotFoundError when it is timed; the breakdown goes on."""
    from types import SimpleNamespace

    from tasks.kernel_table import kernel_files

    source = read_text(H200 / "resnet18_forward_0.py.gz")
    name, path = next((n, p) for n, p in kernel_definitions(source).items() if n.startswith("triton_"))
    cut = tmp_path / "forward_0.py"
    cut.write_text(source[: source.index(f"{name} = async_compile.triton(") + 200])
    assert kernel_files([SimpleNamespace(path=str(cut))]) == {name: path}


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the load failure needs a machine without a GPU")
def test_prepare_notes_each_kernel_it_cannot_ready(tmp_path):
    """The microbenchmarks' untimed half (tasks/kernel_bench.prepare) readies only what it can
    load, and each other row says why; here a real H200 kernel file cannot load (no GPU
    backend), and one row has no kernel object at all."""
    from tasks import kernel_bench

    class Launched:  # stands for the job's compiled kernel, which needs a GPU to exist
        launchers = [object()]

    table = {"rows": [{"name": "triton_poi_a", "kernel_path": str(H200 / "triton_poi.py")},
                      {"name": "triton_red_b", "kernel_path": str(H200 / "triton_red.py")}]}
    ready = kernel_bench.prepare(table, {"triton_poi_a": Launched()}, budget_s=10.0)
    assert ready == {}
    assert table["rows"][0]["error"].startswith("RuntimeError: Could not find an active GPU backend")
    assert table["rows"][1]["error"] == "kernel object or file not found in the compiled modules"
    assert table["prepare_s"] >= 0
