"""The report's findings (sweeper/reporting/findings.py), each rule on records captured on
an H200 (tests/fixtures/h200): the sentence and the figures it quotes, a case where the
rule fires and one where it does not."""

import gzip
import json
from pathlib import Path

import pandas as pd
import pytest

from sweeper.reporting import findings as fd
from sweeper.reporting import tables
from sweeper.reporting.pairs import all_pairs

H200 = Path(__file__).parent / "fixtures" / "h200"


def load(paths) -> dict[str, pd.DataFrame]:
    recs = []
    for n, p in enumerate(paths):
        rec = json.loads(gzip.decompress(Path(p).read_bytes()))
        rec["job"] = dict(rec.get("job") or {}, id=str(n))
        recs.append(rec)
    return {"jobs": tables.jobs_table(recs), "cats": tables.categories_table(recs),
            "kernels": tables.kernels_table(recs), "bench": tables.microbench_table(recs)}


@pytest.fixture(scope="module")
def example():
    """The example grid: densenet121 b16 and mixnet_l b128 training with CUDA graphs off and
    on, resnet18 b32 inference with max-autotune off and on."""
    return load(H200 / "example" / f"{n}.result.json.gz" for n in range(6))


def of(found, rule, scope=None):
    return [f for f in found if f.rule == rule and (scope is None or f.scope == scope)]


def test_launch_bound_with_what_cuda_graphs_did(example):
    found = fd.launch_bound(example["jobs"])
    (dense,) = of(found, "launch_bound")
    assert dense.scope == "densenet121 b16 train fp16"
    assert dense.text.startswith("densenet121 b16 train fp16 is launch-bound: the GPU is busy 27% of its 37.4 ms step, "
                                 "running 2047 kernels a step of 4.0 µs on average.")
    assert "With CUDA graphs (densenet121 b16 train fp16 cudagraphs) the GPU is busy 91% and the step takes 11.8 ms: " \
           "3.2x faster." in dense.text
    assert dense.figures["graphs_busy_pct"] == pytest.approx(90.93, abs=0.01) and dense.link == "#job-0"
    # mixnet_l b128 keeps the GPU busy 92%: not launch-bound; nor is a CUDA-graphs job at 91%
    assert not any(f.scope.startswith("mixnet_l") or "cudagraphs" in f.scope for f in found)


def test_layout_conversions_name_their_kernels_and_shares(example):
    found = fd.fold_twins(fd.layout_conversions(example["jobs"], example["kernels"]), example["jobs"])
    dense = of(found, "layout_conversions", "densenet121 b16 train fp16")[0]
    assert dense.text.startswith("18.6% of densenet121 b16 train fp16's GPU time goes to layout conversions: "
                                 "cuDNN's NCHW to NHWC conversion 13.0% (387 launches a step), cuDNN's NHWC to NCHW "
                                 "conversion 5.3% (187 launches a step)")
    assert "The same in densenet121 b16 train fp16 cudagraphs: 18.6%." in dense.text  # its twin, folded in
    mix = of(found, "layout_conversions", "mixnet_l b128 train fp16")[0]
    assert mix.figures["ATen's strided copy"] == pytest.approx(13.75, abs=0.01)
    # resnet18 b32 inference: its cuDNN conversions hold 2.6% of the step, under the 5% threshold
    assert not of(found, "layout_conversions", "resnet18 b32 infer fp16")
    assert len(found) == 2


def test_autotune_speedup_template_wins_and_payback(example):
    (f,) = fd.autotune(example["jobs"], example["kernels"])
    # the kernels moved beyond their run-to-run noise (-7.2% against ±5%); the step moved -27%, which
    # neither the kernels (the GPU busy 63-81%) nor the launches (75 -> 66) account for: no step speedup
    assert f.text.startswith("max-autotune on resnet18 b32 infer fp16: the kernels' time a step goes from 0.695 ms "
                             "to 0.645 ms: 1.08x faster; the step: cannot tell (it moved -27.3% while the kernels' "
                             "time moved -7.2% and the GPU is busy 63-81% of the step;")
    assert "1.38x" not in f.text and f.figures["speedup"] == pytest.approx(0.695142 / 0.644908, rel=1e-4)
    assert "libraries (cuDNN, cuBLAS) hold 62% of the GPU time and Triton 37%" in f.text
    assert "Triton templates run 19 of 20 convolution launches and 1 of 1 matmul launches a step, 53% of its GPU" in f.text
    # the payback is of the figure the verdict stands on: 0.050 ms of kernel time a step
    assert "Its compile took 67 s longer: 1340 s for each millisecond saved of kernel time a step, paid back after " \
           "1,339,665 steps." in f.text
    assert f.figures["payback_steps"] == pytest.approx(67.297 * 1000 / (0.695142 - 0.644908), rel=1e-3)
    # a sweep without its autotune=off twin: no pair, no finding
    only_on = example["jobs"][example["jobs"]["job"] != 4]
    assert fd.autotune(only_on, example["kernels"]) == []
    # a compile seeded from the stores is not a cold one: no payback is claimed
    seeded = example["jobs"].copy()
    seeded.loc[seeded["job"] == 5, "compile_state"] = "seeded"
    (g,) = fd.autotune(seeded, example["kernels"])
    assert "paid back" not in g.text and "not a cold compile's" in g.text


def test_memory_bound_kernels_far_from_the_roofline(example):
    found = fd.memory_bound(example["bench"])
    mix = of(found, "memory_bound", "mixnet_l b128 train fp16")[0]
    assert "triton_red_fused__native_batch_norm_legit_functional_native_bat… (5.3% of its Triton time, 270 MB a " \
           "launch) reaches 18% of the measured peak bandwidth" in mix.text
    assert "No other config of theirs ran 1% faster" in mix.text
    # a kernel moving a few bytes is latency-bound, not memory-bound: densenet121's add_copy__ (0.0% of peak) is not named
    dense = of(found, "memory_bound", "densenet121 b16 train fp16")[0]
    assert "add_copy" not in dense.text
    # one whose costliest kernels reach half the peak or more is not named at all
    high = example["bench"].assign(pct_of_peak_bandwidth=80.0)
    assert fd.memory_bound(high) == []


def test_across_runs_names_what_stands_out_and_busy_side_by_side(example):
    found = fd.across_runs(example["jobs"])
    texts = [f.text for f in found]
    assert "resnet18 b32 infer fp16 autotune spends 53% of its GPU time in Triton template, against 0% for the other " \
           "jobs (their median)." in texts
    assert texts[-1].startswith("GPU busy side by side: densenet121 b16 train fp16 27%, densenet121 b16 train fp16 "
                                "cudagraphs 91%, mixnet_l b128 train fp16 92%")
    # the two densenet121 jobs alone: nothing stands out, only the busy figures
    dense = example["jobs"][example["jobs"]["model"] == "densenet121"]
    assert [f.text.split(":")[0] for f in fd.across_runs(dense)] == ["GPU busy side by side"]


def test_module_view_against_the_step():
    """resnet18 b32 training: ATen's kernels take 2.9% of the real step and 0.2% of its
    modules profiled alone (they run outside the compiled modules): a finding. The example
    grid's jobs agree within 0.2 points: none."""
    run = load([H200 / "resnet18_result.json.gz"])
    found, table = fd.module_view(run["jobs"], run["cats"])
    (f,) = found
    assert "put 0.2% of the time in ATen native kernel, its real step 2.9% (-2.6 points)" in f.text
    assert table.iloc[0]["category"] == "aten_native"
    example = load(H200 / "example" / f"{n}.result.json.gz" for n in range(6))
    none, table = fd.module_view(example["jobs"], example["cats"])
    assert none == [] and len(table) == 4 and table["difference_pp"].abs().max() < 0.2


def test_pairs_differ_in_one_key_and_the_missions_pair(example):
    pairs = all_pairs(example["jobs"])
    assert [(p.key, p.a["label"], p.b["label"]) for p in pairs] == [
        ("cudagraphs", "densenet121 b16 train fp16", "densenet121 b16 train fp16 cudagraphs"),
        ("cudagraphs", "mixnet_l b128 train fp16", "mixnet_l b128 train fp16 cudagraphs"),
        ("autotune", "resnet18 b32 infer fp16", "resnet18 b32 infer fp16 autotune"),
        ("model", "densenet121 b16 train fp16", "mixnet_l b128 train fp16")]
    assert pairs[0].name(pairs[0].b) == "cudagraphs=on · densenet121 b16 train fp16 cudagraphs"
    assert pairs[-1].caption == "densenet121 b16 train fp16 against mixnet_l b128 train fp16 (model pair)"


def test_a_cpu_sweep_draws_only_what_a_cpu_supports():
    """No launch-bound, layout or roofline finding without a GPU: the rules ask for one."""
    jobs = load(H200 / "example" / f"{n}.result.json.gz" for n in range(6))
    cpu = jobs["jobs"].assign(gpu=None)
    assert fd.launch_bound(cpu) == [] and fd.layout_conversions(cpu, jobs["kernels"]) == []
    assert fd.memory_bound(pd.DataFrame(columns=jobs["bench"].columns)) == []
    assert fd.across_runs(cpu)[-1].text.startswith("CPU busy side by side")


def test_where_the_time_goes_comes_first_for_every_job(example):
    found, _ = fd.all_findings(example["jobs"], example["cats"], example["kernels"], example["bench"])
    first = found[:len(example["jobs"])]
    assert [f.rule for f in first] == ["where_time_goes"] * 6 and len(of(found, "where_time_goes")) == 6
    step = example["cats"][example["cats"]["scope"] == "step"]
    for f in first:
        mine = step[step["label"] == f.scope].sort_values("share_pct", ascending=False)
        assert f.figures["category"] == mine.iloc[0]["category"]
        assert f.text.startswith(f"{f.scope}: {mine.iloc[0]['share_pct']:.0f}% of its GPU time a step")
        assert "oneDNN" not in f.text and "the GPU is busy" in f.text
    mixnet = of(found, "where_time_goes", "mixnet_l b128 train fp16")[0]
    assert "Library mm/conv (cuBLAS, cuDNN, CUTLASS, nvjet)" in mixnet.text
    kernels = example["kernels"]
    costliest = kernels[(kernels["scope"] == "step") & (kernels["label"] == mixnet.scope)].nlargest(1, "share_pct")
    assert mixnet.figures["kernel"] == costliest.iloc[0]["kernel"]


def test_where_the_time_goes_on_a_cpu_names_cpu_libraries():
    """A CPU job's sentence (the same rule on a record whose GPU is none)."""
    jobs = pd.DataFrame([{"job": 0, "label": "resnet18 b2 train bf16", "status": "ok", "gpu": None,
                          "compiled_step_ms": 77.45, "eager_step_ms": 61.7, "busy_pct": 83.2}])
    cats = pd.DataFrame([{"job": 0, "label": "resnet18 b2 train bf16", "scope": "step", "category": c,
                          "device_ms": ms, "share_pct": pct}
                         for c, ms, pct in (("library_mm_conv", 41.45, 62.1), ("cpp_kernel", 16.17, 24.2),
                                            ("aten_native", 9.1, 13.7))])
    kernels = pd.DataFrame([{"job": 0, "scope": "step", "kernel": "aten::convolution_backward",
                             "category": "library_mm_conv", "share_pct": 43.8}])
    (f,) = fd.where_time_goes(jobs, cats, kernels)
    # its compiled step is slower than eager: said first, with what the record shows (faults round 4)
    assert f.text == ("resnet18 b2 train bf16: its compiled step is slower than eager, 77.5 ms against 61.7 ms "
                      "(0.80x); what the record shows: on a CPU, Inductor's C++ kernels against ATen's own. "
                      "62% of its CPU time a step (66.7 ms) goes to Library mm/conv "
                      "(oneDNN, BLAS); its costliest kernel, aten::convolution_backward, 44%; then Inductor C++ "
                      "kernel 24%.")


def test_the_pairs_figure_mentions_the_model_pair_only_where_the_sweep_has_one_of_them(tmp_path):
    """A resnet18 sweep was never after densenet121 against mixnet_l: its note does not say
    the pair is missing; a sweep with densenet121 alone does."""
    from sweeper.reporting.pair_figures import pairs_figure

    def one(model):
        return pd.DataFrame([{"job": 0, "label": f"{model} b2 train bf16", "status": "ok", "model": model,
                              "key": f"model={model}", "gpu": None, "batch_size": 2, "mode": "training",
                              "cudagraphs": False, "autotune": False, "amp": True}])

    cats = pd.DataFrame(columns=["job", "scope", "category", "share_pct"])
    resnet = pairs_figure(one("resnet18"), cats, tmp_path)
    assert resnet.path is None and "densenet121" not in resnet.note and "differ in one key only" in resnet.note
    dense = pairs_figure(one("densenet121"), cats, tmp_path)
    assert "lacks a finished densenet121 / mixnet_l pair" in dense.note
