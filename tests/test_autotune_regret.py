"""Where max-autotune loses (sweeper/analysis/autotune_regret.py and its report rows): sites
compared by their kernels' time, what ran them each way, the noise and size bounds; the
committed H200 headline (records without module times) says it cannot tell."""

from __future__ import annotations

import pandas as pd
import pytest

from conftest import FIXTURES, H200, fixture_records
from sweeper.analysis import autotune_regret as ar
from sweeper.reporting import tables
from sweeper.reporting.autotune_regret import REGRET_COLUMNS, regret_findings, regret_table

T, L = "triton_template", "library_mm_conv"


def row(module, pass_, category, ms, typical=None):
    return {"module": module, "pass": pass_, "class": "Conv2d", "category": category, "device_ms": ms,
            "typical_ms": typical, "source": "net.py:1"}


def test_layers_moved_beyond_noise_with_what_ran_them():
    off = [row("l1.conv", "forward", L, 1.00), row("l1.bn", "forward", "triton_poi", 0.2),
           row("l2.conv", "forward", L, 2.00), row("l3.conv", "forward", L, 0.50), row("l4.bn", "forward", "triton_poi", 3.0),
           row("l5.conv", "forward", L, 0.010)]
    on = [row("l1.conv", "forward", T, 1.60), row("l1.bn", "forward", "triton_poi", 0.2),  # 1.2 -> 1.8: slower
          row("l2.conv", "forward", T, 1.50),  # 2.0 -> 1.5: faster
          row("l3.conv", "forward", T, 0.52),  # +4%: inside the 5% noise
          row("l4.bn", "forward", "triton_poi", 2.0),  # no autotuned op ran there: not compared
          row("l5.conv", "forward", T, 0.030)]  # tripled, but 0.02 ms is under 0.5% of the 10-ms step
    got = ar.compare(off, on, step_kernel_ms=10.0)
    assert [(r["layer"], r["verdict"]) for r in got] == [("l1", ar.SLOWER), ("l2", ar.FASTER)]
    slow = got[0]
    assert slow["off_ms"] == pytest.approx(1.2) and slow["on_ms"] == pytest.approx(1.8)
    assert (slow["off_ran"], slow["on_ran"]) == ("library", "Triton template") and slow["change_pct"] == pytest.approx(50)
    # at a CPU host's noise of 60% neither the 50% loss nor the 25% gain counts
    assert ar.compare(off, on, 10.0, noise_pct=60.0) == []


def test_a_fused_epilogue_is_compared_in_its_layer():
    """With a template, the convolution's batch norm and activation run inside the template kernel, whose time
    is split over the three by their work: module by module the conv gains and the activation loses; the layer
    did not move (resnet50 b64 inference on an H100: layer1.0.act3 0.013 -> 0.076 ms)."""
    off = [row("layer1.0.conv3", "forward", L, 0.100), row("layer1.0.bn3", "forward", "triton_poi", 0.020),
           row("layer1.0.act3", "forward", "triton_poi", 0.013)]
    on = [row("layer1.0.conv3", "forward", T, 0.040), row("layer1.0.bn3", "forward", T, 0.018),
          row("layer1.0.act3", "forward", T, 0.076)]
    assert ar.compare(off, on, step_kernel_ms=3.0) == []  # 0.133 -> 0.134 ms: the layer did not move
    assert ar.layer_of("layer1.0.act3") == "layer1.0" and ar.layer_of("conv1") == "(model)"


def test_the_median_steps_time_decides_where_every_row_has_it():
    off = [row("conv1", "forward", L, 5.0, typical=1.0)]  # a preempted step moved the mean, not the median
    on = [row("conv1", "forward", T, 1.1, typical=1.02)]
    assert ar.compare(off, on, 10.0) == []


def _pair(modules_off, modules_on):
    jobs = pd.DataFrame([{"job": 0, "label": "net", "key": "model=net,autotune=False", "autotune": False, "status": "ok",
                          "device_ms": 10.0, "gpu": "NVIDIA H100", "step_noise_pct": 1.0},
                         {"job": 1, "label": "net autotune", "key": "model=net,autotune=True", "autotune": True,
                          "status": "ok", "device_ms": 10.5, "gpu": "NVIDIA H100", "step_noise_pct": 1.0}])
    modules = pd.DataFrame([{"job": 0, **r} for r in modules_off] + [{"job": 1, **r} for r in modules_on])
    return jobs, modules


def test_the_table_and_the_finding_of_a_pair():
    jobs, modules = _pair([row("s1.conv", "backward", L, 1.0), row("s2.conv", "forward", L, 2.0)],
                          [row("s1.conv", "backward", T, 1.5), row("s2.conv", "forward", T, 1.8)])
    table = regret_table(jobs, modules)
    assert list(table.columns) == list(REGRET_COLUMNS) and len(table) == 2
    assert table.iloc[0]["layer"] == "s1" and table.iloc[0]["job_on"] == 1
    (f,) = regret_findings(jobs, modules, table)
    assert f.text == ("Where max-autotune loses in net: 1 layer takes 0.500 ms a step longer with it: s1 (backward) "
                      "1.000 -> 1.500 ms (library -> Triton template); 1 layer gains 0.200 ms.")
    assert f.figures["lost_ms"] == pytest.approx(0.5)


def test_records_without_module_times_cannot_tell():
    recs = fixture_records(H200 / "headline")
    jobs = tables.jobs_table(recs)
    modules = pd.DataFrame([r for rec in recs for r in tables.model_module_rows(rec, None)],
                           columns=list(tables.MODEL_MODULE_COLUMNS))
    table = regret_table(jobs, modules)
    assert table.empty
    found = regret_findings(jobs, modules, table)
    assert len(found) == 2 and all("cannot tell, one of the twins has no module times" in f.text for f in found)


def test_the_layers_of_resnet50_on_an_h100():
    """Module by module, the template's fused epilogue makes layer1.0.act3 look 6x slower (0.013 -> 0.076 ms); the
    layer it belongs to moved 0.233 -> 0.322 ms, and that is what the table says."""
    recs = fixture_records(FIXTURES / "h100" / "autotune_parts")
    jobs = tables.jobs_table(recs)
    modules = pd.DataFrame([r for rec in recs for r in tables.model_module_rows(rec, None)],
                           columns=list(tables.MODEL_MODULE_COLUMNS))
    table = regret_table(jobs, modules)
    assert not table.empty and set(table["layer"]) <= set(ar.layer_of(m) for m in modules["module"])
    first = table.iloc[0]
    assert (first["layer"], first["verdict"]) == ("layer1.0", ar.SLOWER)
    assert first["off_ms"] == pytest.approx(0.233, abs=0.001) and first["on_ms"] == pytest.approx(0.322, abs=0.001)
    assert "act3" not in " ".join(table["layer"])
    (f,) = regret_findings(jobs, modules, table)
    assert f.text.startswith("Where max-autotune loses in resnet50 b64 infer fp16: 6 layers take 0.265 ms a step "
                             "longer with it: layer1.0 (forward) 0.233 -> 0.322 ms (library -> Triton template and library)")
