"""What to turn on of max-autotune (sweeper/analysis/autotune_advice.py and its finding): the
gain split between templates and kernel configs, each against noise; the committed H200
headline; and on a CPU, a real sweep whose advised settings run as a job that the finding
then checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import FIXTURES, H200, fixture_records
from sweeper.analysis import autotune_advice as aa
from sweeper.reporting import tables
from sweeper.reporting.autotune_advice import advice_findings, advised_job

ROOT = Path(__file__).resolve().parent.parent


def job(n, autotune, device_ms, shares, compile_s=100.0, inductor="", **more):
    key = f"model=net,autotune={autotune}" + (f",{inductor}" if inductor else "")
    return {"job": n, "label": f"net{' autotune' if autotune else ''}{' ' + inductor if inductor else ''}", "key": key,
            "autotune": autotune, "status": "ok", "device_ms": device_ms, "gpu": "NVIDIA H100", "compile_s": compile_s,
            "compile_state": "cold", "peak_memory_mb": 1000.0, **{f"share_{c}": v for c, v in shares.items()}, **more}


def test_the_gain_is_split_between_templates_and_kernel_configs():
    # off: 6 ms mm/conv (library), 4 ms Triton; on: templates 6 -> 5.9 (within 5%), Triton 4 -> 3 (gains 1 ms)
    off = job(0, False, 10.0, {"library_mm_conv": 60.0, "triton_reduction": 40.0}, compile_s=100.0,
              template_tuning_s=0.0, coordinate_descent_s=0.0, kernel_autotuning_s=5.0)
    on = job(1, True, 8.9, {"library_mm_conv": 33.7, "triton_template": 32.6, "triton_reduction": 33.7}, compile_s=400.0,
             template_tuning_s=100.0, coordinate_descent_s=180.0, kernel_autotuning_s=25.0)
    a = aa.advise(off, on)
    words = {r.part.name: r.word for r in a.results}
    assert words == {"templates": aa.WITHIN, "kernel configs": aa.GAINS}
    assert [r.part for r in a.turn_on] == [aa.KERNEL_CONFIGS]
    assert a.settings == ("autotune=off", "+inductor.coordinate_descent_tuning=true", "+inductor.max_autotune_pointwise=true")
    assert a.compile_s == pytest.approx(180.0 + 20.0) and a.full_compile_s == pytest.approx(300.0)
    gain = 4.0 - 8.9 * 0.337
    assert a.payback_steps == pytest.approx(200.0 * 1000 / gain, rel=1e-3)
    # both parts gaining: all of max-autotune, at its whole extra compile
    both = dict(on, share_library_mm_conv=20.0, share_triton_template=20.0, share_triton_reduction=30.0, device_ms=7.0)
    b = aa.advise(off, both)
    assert b.settings == ("autotune=on",) and b.compile_s == pytest.approx(300.0) and b.kept_pct == pytest.approx(100.0)
    # neither: leave it off
    flat = dict(on, share_library_mm_conv=60.0, share_triton_template=0.0, share_triton_reduction=40.0, device_ms=10.1)
    c = aa.advise(off, flat)
    assert c.settings == ("autotune=off",) and c.turn_on == [] and c.payback_steps is None


def test_the_advised_run_in_the_sweep_is_checked():
    shares_off = {"library_mm_conv": 60.0, "triton_reduction": 40.0}
    jobs = pd.DataFrame([
        job(0, False, 10.0, shares_off, compile_s=100.0, template_tuning_s=0.0, coordinate_descent_s=0.0,
            kernel_autotuning_s=5.0),
        job(1, True, 9.0, {"library_mm_conv": 66.7, "triton_reduction": 33.3}, compile_s=400.0, template_tuning_s=100.0,
            coordinate_descent_s=180.0, kernel_autotuning_s=25.0),
        job(2, False, 9.1, {"library_mm_conv": 65.9, "triton_reduction": 34.1}, compile_s=290.0,
            inductor="inductor.coordinate_descent_tuning=True,inductor.max_autotune_pointwise=True")])
    (f,) = advice_findings(jobs)
    assert "Turn on the kernel configs alone (`autotune=off +inductor.coordinate_descent_tuning=true " \
           "+inductor.max_autotune_pointwise=true`)" in f.text
    assert "Checked: net inductor.coordinate_descent_tuning=True,inductor.max_autotune_pointwise=True ran the kernels " \
           "in 9.10 ms a step, against 10.0 ms off and 9.00 ms with all of max-autotune (90% of its gain kept); its " \
           "compile 290 s, against 100 s off and 400 s with all of it." in f.text
    assert f.figures["checked_kept_pct"] == pytest.approx(90.0)


def test_the_headline_on_the_h200():
    """mixnet_l's gain is its Triton kernels' (coordinate descent); densenet121's kernel configs made its Triton
    reductions slower (1.36 -> 2.01 ms a step), the kind pytorch#194736 reports: leave max-autotune off."""
    recs = fixture_records(H200 / "headline")
    found = {f.scope: f for f in advice_findings(tables.jobs_table(recs))}
    mix, dense = found["mixnet_l b128 train fp16"], found["densenet121 b16 train fp16"]
    assert "kernel configs: Inductor's own Triton kernels (pointwise, reduction) 19.9 ms -> 17.7 ms, 2.211 ms a step " \
           "faster, 656 s of compile" in mix.text
    assert mix.figures["settings"] == "autotune=off +inductor.coordinate_descent_tuning=true " \
                                      "+inductor.max_autotune_pointwise=true"
    assert "Leave it off: no part of it made its kernels faster beyond noise" in dense.text
    assert "With it, Triton reduction kernels took 2.01 ms a step against 1.36 ms (its kernel configs' part)." \
        in dense.text


@pytest.mark.slow
def test_the_parts_sweep_runs_each_part_and_the_finding_finds_its_jobs(tmp_path):
    """`+sweep=autotune_parts` on a CPU: max-autotune off, on, the templates alone (the CPU's C++ GEMM templates
    against oneDNN) and the kernel configs alone. The advice's settings are the ones those jobs ran with: the
    finding is on the page, and advised_job finds each part's job beside the off twin (freezing kept)."""
    overrides = ["+sweep=autotune_parts", "model=test_resnet", "mode=inference", "image_size=32", "batch_size=8",
                 "+inductor.freezing=true", "measure.timed_steps=2", "measure.warmup_steps=1", "measure.profile_steps=2",
                 "measure.module_rounds=2", "measure.module_calls_per_round=1", "measure.module_profile_calls=1",
                 "measure.eager=false", "measure.steady_loop_s=0", "measure.microbench=false", f"hydra.sweep.dir={tmp_path}"]
    proc = subprocess.run([sys.executable, "-m", "sweeper", *overrides], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, SWEEPER_COMPILE_STORE="off"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    jobs = pd.read_parquet(tmp_path / "tables" / "jobs.parquet")
    assert len(jobs) == 4 and (jobs["status"] == "ok").all()
    off = jobs[~jobs["autotune"] & ~jobs["key"].str.contains("max_autotune")].iloc[0]
    assert "inductor.freezing=True" in off["key"]
    page = (tmp_path / "report.html").read_text()
    assert f"What to turn on of max-autotune for {off['label']}:" in page
    templates = advised_job(jobs, off, ("autotune=off", *aa.TEMPLATES.settings))
    configs = advised_job(jobs, off, ("autotune=off", *aa.KERNEL_CONFIGS.settings))
    assert templates is not None and configs is not None and templates["job"] != configs["job"]
    assert "inductor.max_autotune_gemm=True" in templates["key"] and "inductor.freezing=True" in templates["key"]
    assert "inductor.coordinate_descent_tuning=True" in configs["key"]
    # the templates' job really timed template choices (C++ GEMM against oneDNN); the off job did not
    assert templates["template_tuning_s"] > 0 and off["template_tuning_s"] == 0
    # and it has the decisions behind them, as an autotune=on job has
    from sweeper.record import read_record

    decisions = read_record(tmp_path / str(int(templates["job"])))["autotune_decisions"]
    assert decisions["used_ops"] >= 1 and decisions["rows"] and {r["timed"] for r in decisions["rows"]} == {"here"}
    # each names the model module its op was lowered for (the regret table's isolation figures): on a CPU
    # the C++ GEMM template competes for the linear layer only, test_resnet's classifier
    assert {s for r in decisions["rows"] for s in r["sites"]} == {"fc (forward)"}, decisions["rows"]
    assert "autotune_decisions" not in read_record(tmp_path / str(int(off["job"])))


def test_the_parts_on_an_h100():
    """resnet50 b64 inference on an H100 (bench/gpu_run.sh autotune_parts): max-autotune's kernels 3.17 -> 3.23 ms,
    neither part beyond noise, 428 s more compile: leave it off. Each part's own job is found beside the off twin,
    and the autotune=on job has the decisions behind its 24 choices."""
    from sweeper.reporting.kernel_findings import autotune

    recs = fixture_records(FIXTURES / "h100" / "autotune_parts")
    jobs = tables.jobs_table(recs)
    off = jobs[~jobs["autotune"] & ~jobs["key"].str.contains("inductor.")].iloc[0]
    (f,) = advice_findings(jobs)
    assert "Leave it off: no part of it made its kernels faster beyond noise, and it adds 428 s of compile." in f.text
    assert "templates: matmul and convolution kernels (templates against library calls) 1.50 ms -> 1.56 ms, within " \
           "noise, 262 s of compile" in f.text
    assert advised_job(jobs, off, ("autotune=off", *aa.TEMPLATES.settings))["template_tuning_s"] == pytest.approx(339.132)
    assert advised_job(jobs, off, ("autotune=off", *aa.KERNEL_CONFIGS.settings))["coordinate_descent_s"] > 100
    (v,) = autotune(jobs, tables.kernels_table(recs))
    assert "the kernels' time a step goes from 3.17 ms to 3.23 ms: within noise (+2.0%, noise ±5.0%)" in v.text
    assert v.figures["speedup"] is None
    on = next(r for r in recs if r["config"]["autotune"])
    d = on["autotune_decisions"]
    assert d["used_ops"] == 24 and len(d["rows"]) == 24 and d["from_store"] == 0
    assert {r["timed"] for r in d["rows"]} == {"here"}
