"""Max-autotune's decisions against their noise (sweeper/analysis/autotune_decisions.py, the
store's repeats, `python -m sweeper.store decisions`, the job's record and the report's
finding), on real autotune stores from an H200: the headline's (mixnet_l and densenet121,
autotune on), and the same resnet18 job run twice into two stores (serial_noise)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis import autotune_decisions as ad
from sweeper.job_spec import AutotuneSeed
from sweeper.stores.export import read_export
from sweeper.stores import autotune_store as st
from tests.conftest import H200

ROOT = Path(__file__).resolve().parent.parent
HEADLINE = H200 / "headline_store.tgz"
TWICE = (H200 / "serial_noise" / "store_a.tgz", H200 / "serial_noise" / "store_b.tgz")
KEY = "torch-2.11.0+cu130/c33ff64252de0fc95aafeb63c22d2f93666cf684f9102841c20702613368c40d.json"
# an addmm of the headline's mixnet_l (fp16, batch 128: 1584 features to 132)
ADDMM = ad.Key("addmm", "[('cuda', 'torch.float16', 128, 132, 0, 1, 0), ('cuda', 'torch.float16', 128, 1584, 1584, 1, 0), "
                        "('cuda', 'torch.float16', 1584, 132, 1, 1584, 0)]", "highest")


def timings(path: Path) -> dict:
    return ad.timings(read_export(path)[1][KEY])


def test_one_choices_timings_between_two_runs_give_the_noise():
    a, b = (timings(p) for p in TWICE)
    assert len(a) == len(b) == 12 and a.keys() == b.keys()
    gaps = ad.relative_gaps([a, b])
    assert len(gaps) == 194  # every choice timed in both runs
    assert ad.noise_pct(gaps, 0.5) == pytest.approx(7.89, abs=0.01)  # bench/results/packing/serial_noise: 8.2% median of |a-b|/a
    assert ad.noise_pct(gaps, 0.9) == pytest.approx(68.67, abs=0.01)
    assert ad.noise_pct(gaps[:9]) is None  # too few to say


def test_the_headlines_decisions_are_marked_against_that_noise():
    """The headline store judged by the noise of the pair above (same GPU model and build):
    known entries' winners, margins and marks."""
    a, b = (timings(p) for p in TWICE)
    mine = timings(HEADLINE)
    rows = {(r["op"], r["inputs"]): r for r in ad.decisions(mine, [a, b])}
    fc = rows[(ADDMM.op, ADDMM.inputs)]
    times = mine[ADDMM]
    best, second = sorted(times.values())[:2]
    assert fc["winner"].startswith("triton_mm-") and fc["winner_ms"] == best and fc["choices"] == 21  # 22 tried, one did not run (inf)
    assert fc["margin_pct"] == pytest.approx((second - best) / best * 100)  # 1.4%: a coin flip
    assert fc["noise_pct"] == pytest.approx(68.67, abs=0.01) and fc["mark"] == ad.WITHIN
    # against the library call (cuBLAS addmm: 0.0458 ms against 0.0184): a real decision
    assert fc["library_ms"] == pytest.approx(0.04576, abs=1e-5)
    assert fc["library_margin_pct"] == pytest.approx((0.04576 - best) / best * 100, rel=1e-3)
    assert fc["library_mark"] == ad.REAL and fc["gain_ms"] == pytest.approx(0.04576 - best, abs=1e-5)
    # the costliest op: a convolution where cuDNN beat every template by 8.5x, beyond any noise
    first = ad.decisions(mine, [a, b])[0]
    assert first["op"] == "convolution" and first["winner_kind"] == "library" and first["mark"] == ad.REAL
    assert first["margin_pct"] > 800 and first["gain_ms"] == 0
    s = ad.summary(list(rows.values()))
    assert (s["decisions"], s["within_noise"], s["beyond_noise"], s["templates_won"]) == (142, 110, 32, 104)
    assert s["templates_won_beyond_noise"] == 78 and s["gain_beyond_noise_ms"] < s["gain_ms"]


def test_the_within_noise_mark_foretells_most_flips_of_the_second_run():
    """The same job run twice: 9 of 12 choices flipped; judged leave-one-out (each op by the
    others' gaps), 8 of the 9 were marked within noise. Template against library call: none flipped."""
    a, b = (timings(p) for p in TWICE)
    rows = ad.flips(a, b, ad.decisions(a, [a, b]))
    flipped = [r for r in rows if r["flipped"]]
    assert len(rows) == 12 and len(flipped) == 9
    assert sum(r["mark"] == ad.WITHIN for r in flipped) == 8
    assert not any(r["kind_flipped"] for r in rows)
    # leave-one-out: an op's own gaps do not set its noise
    own = ad.noise_pct(ad.relative_gaps([a, b]))
    assert any(r["noise_pct"] != own for r in rows)


def test_the_store_keeps_a_choices_earlier_timings_as_repeats(tmp_path):
    doc = {"cache": {"mm": {"k": {"highest": {"triton_mm-a": 1.0, "mm-b": 2.0}}}}}
    st.merge_into_store(tmp_path, "sys", json.loads(json.dumps(doc)))
    again = {"cache": {"mm": {"k": {"highest": {"triton_mm-a": 1.2, "mm-b": 2.0, "triton_mm-c": 3.0}}}}}
    st.merge_into_store(tmp_path, "sys", again)
    kept = st.read_doc(tmp_path / "sys.json")
    assert kept["cache"]["mm"]["k"]["highest"] == {"triton_mm-a": 1.2, "mm-b": 2.0, "triton_mm-c": 3.0}
    assert kept["repeats"] == {"mm": {"k": {"highest": {"triton_mm-a": [1.0]}}}}  # timed the same: no repeat
    for ms in (1.1, 1.3, 1.4, 1.5, 1.6):
        st.merge_into_store(tmp_path, "sys", {"cache": {"mm": {"k": {"highest": {"triton_mm-a": ms}}}}})
    kept = st.read_doc(tmp_path / "sys.json")
    assert kept["repeats"]["mm"]["k"]["highest"]["triton_mm-a"] == [1.1, 1.3, 1.4, 1.5]  # the last 4 earlier ones
    runs = ad.repeat_runs(kept)
    key = ad.Key("mm", "k", "highest")
    assert [r[key]["triton_mm-a"] for r in runs] == [1.5, 1.4, 1.3, 1.1]  # latest earlier first
    assert st.shape_problem({"cache": {}, "repeats": []}) == "repeats is list, not a mapping"


def test_a_job_judges_the_ops_its_compile_chose_for(tmp_path):
    """tasks/job_stores.py: without the ops its compile selected for, a job judges the ops it
    timed itself (a seeded op found complete is left out); an op it timed again is its own, and
    its seed's timing of it is a repeat for the noise. With them, every op it chose for."""
    from tasks import job_stores

    seed_doc = {"system": {"device": {"name": "NVIDIA H200"}}, "cache": {
        "mm": {"seeded": {"highest": {"triton_mm-a": 1.0, "mm-b": 2.0}},
               "again": {"highest": {"triton_mm-a": 1.0, "mm-b": 1.05}}}}}
    own = {"system": seed_doc["system"], "cache": {
        "mm": {"seeded": {"highest": {"triton_mm-a": 1.0, "mm-b": 2.0}},
               "again": {"highest": {"triton_mm-a": 1.1, "mm-b": 1.0}},
               "new": {"highest": {"triton_mm-a": 0.5, "mm-b": 0.9}}}}}
    cache = tmp_path / "inductor"
    files = job_stores._job_files(cache)
    files.mkdir(parents=True)
    (files / "sys").write_text(json.dumps(own))
    got = job_stores.autotune_decisions(cache, "sys", AutotuneSeed(systems={"sys": seed_doc}))
    assert sorted(r["inputs"] for r in got["rows"]) == ["again", "new"]
    assert got["noise_gaps"] == 2 and got["seeded_ops"] == 2
    again = next(r for r in got["rows"] if r["inputs"] == "again")
    assert again["winner"] == "mm-b" and again["winner_kind"] == "library" and again["gain_ms"] == 0
    assert again["noise_pct"] is None and again["mark"] == ad.UNKNOWN  # 2 gaps: too few to say
    # told which ops its compile selected for (a seeded op found complete among them), the job's decisions are
    # those behind its choices, the store's timings included
    used = [("mm", "seeded", "highest"), ("mm", "new", "highest"), ("mm", "not in the cache", "highest")]
    got = job_stores.autotune_decisions(cache, "sys", AutotuneSeed(systems={"sys": seed_doc}), used)
    assert {r["inputs"]: r["timed"] for r in got["rows"]} == {"seeded": "store", "new": "here"}
    assert got["used_ops"] == 3 and got["from_store"] == 1
    seeded = next(r for r in got["rows"] if r["inputs"] == "seeded")
    assert seeded["winner"] == "triton_mm-a" and seeded["gain_ms"] == 1.0


def test_the_store_command_lists_the_decisions_and_their_noise(tmp_path):
    def store(*args):
        return subprocess.run([sys.executable, "-m", "sweeper.store", "--store", str(tmp_path / "store"), *args],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)

    empty = store("decisions")
    assert empty.returncode == 2 and "the store is empty" in empty.stderr
    assert store("import", str(HEADLINE)).returncode == 0
    alone = store("decisions", "--top", "3")
    assert alone.returncode == 0 and "142 ops decided; noise unknown" in alone.stdout
    assert "pass another run's export with --against" in alone.stdout
    out = store("decisions", "--against", str(TWICE[0]), "--against", str(TWICE[1]), "--csv", str(tmp_path / "d.csv"))
    assert out.returncode == 0, out.stderr
    assert "noise 68.7% (194 repeated timings); 110 within noise, 32 beyond" in out.stdout
    table = pd.read_csv(tmp_path / "d.csv")
    assert len(table) == 142 and set(table["mark"]) == {ad.WITHIN, ad.REAL}


def test_the_finding_splits_an_autotune_jobs_gain_into_real_decisions_and_the_rest():
    from sweeper.reporting.autotune_decisions import decided

    gpu = {"gpu": "NVIDIA H200", "compiled_step_ms": 12.0, "busy_pct": 90.0, "step_noise_pct": 1.0}
    jobs = pd.DataFrame([{"job": 0, "label": "net autotune", "key": "model=net,autotune=True", "autotune": True,
                          "status": "ok", "device_ms": 9.0, **gpu},
                         {"job": 1, "label": "net", "key": "model=net,autotune=False", "autotune": False,
                          "status": "ok", "device_ms": 10.0, **gpu}])
    rows = [ad.decision(ad.Key("mm", f"k{i}", "highest"), {"triton_mm-a": 1.0, "triton_mm-b": 1.0 + m, "mm-c": lib},
                        50.0) for i, (m, lib) in enumerate([(0.1, 3.0), (0.9, 2.5), (0.05, 1.1)])]
    decisions = pd.DataFrame([{"job": 0, "label": "net autotune", **r} for r in rows])
    (f,) = decided(jobs, decisions)
    # margins to the runner-up 10%, 90%, 5% against 50% noise: 2 within; templates won all 3,
    # beating the library call by 200%, 150%, 10%: 2 beyond noise, worth 3.5 of the 3.6 ms
    assert f.figures == {"decisions": 3, "within_noise": 2, "templates_won": 3, "templates_beyond_noise": 2,
                         "gain_ms": pytest.approx(3.6)}
    assert "2 of them beat their runner-up by less than the noise (50%" in f.text
    assert "worth 3.500 of the 3.600 ms" in f.text
    assert "against autotune off, the kernels' time a step is 1.11x faster" in f.text  # 10 -> 9 ms, beyond ±5%
    assert "decided 3 ops in this job's compile" in f.text
    # a store-seeded job: its decisions are the store's timings it chose by, and the finding says so
    (g,) = decided(jobs, decisions.assign(timed=["store", "store", "here"]))
    assert "decided 3 ops behind this job's choices, 2 of them by an earlier job's timings from the autotune store" \
        in g.text


def test_a_choice_is_a_template_or_a_library_call_by_its_name():
    """The names Inductor gives the choices, as the H200 stores and a CPU job with freezing
    (tests/test_autotune_partial.py's) hold them."""
    templates = ["triton_mm-cqodq4liuzmv7zwtq6adp7i6a5o", "triton_convolution2d-crspg", "CppMicroGemmFP32Vec-cewyuhf33n"]
    libraries = ["addmm-alpha=1-beta=1-c4xxd3iocu4y", "bias_addmm-alpha=1-beta=1-cerhccsn7p", "mm-cq2", "convolution-bias=None",
                 "_mkl_linear-B=None-batch_size=202-ckf3uy"]
    assert [ad.kind(c) for c in templates] == ["template"] * 3 and [ad.kind(c) for c in libraries] == ["library"] * 5
    assert ad.family("bias_addmm-alpha=1-beta=1-cerhccsn7p") == "bias_addmm"


def test_the_ops_max_autotune_selected_for_name_the_modules_they_were_lowered_for():
    """A CPU compile with max-autotune (freezing: C++ GEMM templates against MKL): each op the compile
    selected a choice for, with the modules of the nodes lowered to it; one shape's decision serves both
    modules of that shape."""
    import torch

    from sweeper.torch_internals import probes
    from sweeper.torch_internals.benchmark_lease import record_tuned_ops
    from tasks import provenance

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(64, 128)
            self.b = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 128))

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    from torch._inductor import select_algorithm

    config = probes.inductor_config()
    cls = select_algorithm.AlgorithmSelectorCache
    try:
        with config.patch(freezing=True, post_grad_custom_pre_pass=None, fx_graph_cache=False):
            assert provenance.install() == "installed"
            used = record_tuned_ops()
            torch._dynamo.reset()
            with torch.no_grad():
                torch.compile(Net().eval(), mode="max-autotune-no-cudagraphs")(torch.randn(32, 64))
    finally:  # a job is one process; this test's worker goes on to other tests
        torch._dynamo.reset()
        cls.__call__ = cls._sweeper_unwrapped_call
        select_algorithm.clear_feedback_savers()
    assert len(used) == 2, list(used)
    assert sorted(tuple(used.sites[k]) for k in used) == [("a (forward)",), ("b.0 (forward)", "b.2 (forward)")]
