"""The compile store (sweeper/stores/compile_store.py): a later run of the same job loads what the
first compiled, through the driver and the embedded Ray, with real torch.compile on the CPU."""

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from sweeper.analysis.attribution import OUTSIDE
from sweeper.job_spec import JobSpec, StoredCompile
from sweeper.record import new_record, read_record
from sweeper.reporting.compile_state import compile_state, cpp_builds
from sweeper.stores import exchange
from sweeper.stores import compile_store as cs
from tasks import cpu_libraries, job_stores
from sweeper.torch_internals import kernel_configs

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["model=test_resnet", "image_size=32", "measure.timed_steps=2", "measure.warmup_steps=1",
         "measure.profile_steps=1", "measure.module_rounds=2", "measure.module_calls_per_round=1",
         "measure.module_profile_calls=1", "measure.eager=false", "measure.steady_loop_s=0"]


def sweep(sweep_dir: Path, store: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sweeper", *SMALL, *overrides, f"compile_store={store}",
                           f"hydra.sweep.dir={sweep_dir}"], cwd=ROOT, capture_output=True, text=True, timeout=900)


def step_kernels(rec: dict) -> set[str]:
    return {k["name"] for k in rec["step"]["kernels"]}


def in_graphs_placed_pct(rec: dict) -> float:
    """The share of the step's kernel time inside compiled graphs that was placed on model code."""
    code = rec["model_code"]
    inside = code["device_ms"] - code["unattributed"].get(OUTSIDE, 0.0)
    return code["attributed_ms"] / inside * 100


def step_kernels_cpp(rec: dict) -> set[str]:
    """The step's Inductor C++ kernels (in the forward and the backward graph's libraries)."""
    return {k["name"] for k in rec["step"]["kernels"] if k.get("category") == "cpp_kernel"}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The same training job run twice into two sweep folders, the second beside a job of
    another seed: another job to the compile store (the seed is in its key) with the same
    graphs, which Inductor compiles cold and whose kernels g++ builds no more (the tests'
    compiler cache, tests/tools/cxx_cache.sh); one compile store."""
    d = tmp_path_factory.mktemp("compile_store")
    store = d / "store"
    first = sweep(d / "first", store, "batch_size=2")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    blobs_after_first = {p.name: p.stat().st_mtime_ns for p in store.glob("torch-*/*")}
    second = sweep(d / "second", store, "batch_size=2", "seed=0,1")
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    return d, store, blobs_after_first, second


@pytest.mark.slow
def test_the_first_run_compiles_cold_and_leaves_its_compile_in_the_store(two_runs):
    d, store, blobs, _ = two_runs
    rec = read_record(d / "first" / "0")
    t = rec["timings"]
    assert compile_state(t) == "cold" and t["compile_cache"]["fxgraph_misses"] == 2  # forward and backward
    kept = t["compile_store"]
    assert kept["loaded"] is None and kept["job_bytes"] > 0 and kept["kept_bytes"] == kept["job_bytes"]
    # one job: one blob, its C++ kernel libraries (a CPU job) and their description
    assert sorted(Path(n).suffix for n in blobs) == [".bin", ".gz", ".json"]
    (meta,) = (p for p in store.glob("torch-*/*.json") if p.name in blobs)
    described = json.loads(meta.read_text())
    assert described["torch"] == rec["environment"]["torch"] and described["kinds"]["inductor"] == 2
    libs = described["cpu_libs"]
    assert libs["id"] == cpu_libraries.host_id()["id"] and libs["files"] > 0
    assert kept["job_bytes"] == described["bytes"] + libs["bytes"]
    with tarfile.open(meta.with_name(meta.name.replace(".json", cs.LIBS_SUFFIX))) as tar:
        names = tar.getnames()
    assert len(names) == libs["files"] and sum(n.endswith(".main.so") for n in names) >= len(step_kernels_cpp(rec))
    assert described["cold_compile_s"] == pytest.approx(t["compile_s"] + t["warmup_s"], abs=0.01)
    assert json.loads(described["key"])["batch_size"] == 2
    assert not list((d / "first").glob(f"*/{cs.BLOB}")) and not list((d / "first").glob(f"*/{cs.META}"))


@pytest.mark.slow
def test_a_later_run_of_the_same_job_loads_it_and_runs_the_same_kernels(two_runs):
    d, store, blobs, proc = two_runs
    first, again = read_record(d / "first" / "0"), read_record(d / "second" / "0")
    assert again["config"]["batch_size"] == 2
    t = again["timings"]
    assert t["compile_cache"]["fxgraph_hits"] == 2 and t["compile_cache"]["fxgraph_misses"] == 0
    assert compile_state(t) == "warm" and t["compile_store"]["loaded"]["inductor"] == 2
    assert t["compile_store"]["cold_compile_s"] == pytest.approx(  # the first run's, rounded to ms
        first["timings"]["compile_s"] + first["timings"]["warmup_s"], abs=0.002)
    assert "an earlier run's compile of this job" in proc.stdout + proc.stderr
    # on this CPU the first run's C++ kernel libraries were put back: next to nothing built again
    (meta,) = (p for p in store.glob("torch-*/*.json") if p.name in blobs)  # the first run's
    assert t["compile_store"]["cpu_libraries"] == json.loads(meta.read_text())["cpu_libs"]["files"]
    assert cpp_builds(t) < cpp_builds(first["timings"]) / 4, (cpp_builds(t), cpp_builds(first["timings"]))
    # the same compiled code: the same kernels in the step, the same modules captured and timed,
    # each kernel placed on the same model code (the tagged stack traces travel in the blob)
    assert step_kernels(again) == step_kernels(first)
    assert ({(r["module"], r["pass"], r["category"]) for r in again["model_code"]["rows"]}
            == {(r["module"], r["pass"], r["category"]) for r in first["model_code"]["rows"]})
    assert again["model_code"]["sites"] == first["model_code"]["sites"]
    # of the time inside compiled graphs, as much placed as cold. Not of the whole step: eager
    # code between the graphs (the loss) is one profiled CPU op, and on a loaded 2-core CI
    # machine one such op once took 73% of the step
    assert in_graphs_placed_pct(again) > 80, again["model_code"]
    assert [m["role"] for m in again["modules"]] == ["forward", "backward"]
    assert all(m["status"] == "ok" for m in again["modules"])
    # nothing was compiled, so the store keeps the first run's compile untouched
    assert {p.name: p.stat().st_mtime_ns for p in store.glob("torch-*/*") if p.name in blobs} == blobs
    assert t["compile_store"]["job_bytes"] == t["compile_store"]["bytes"] and "kept_bytes" not in t["compile_store"]


@pytest.mark.slow
def test_another_job_is_never_seeded_with_it(two_runs):
    d, store, _, _ = two_runs
    other = read_record(d / "second" / "1")
    assert other["config"]["seed"] == 1
    t = other["timings"]
    assert t["compile_store"]["loaded"] is None and compile_state(t) == "cold"
    assert t["compile_cache"]["fxgraph_misses"] == 2
    assert len(list(store.glob("torch-*/*.bin"))) == 2  # now one compile a job


@pytest.mark.slow
def test_the_tables_and_report_keep_warm_compiles_apart(two_runs):
    d, _, _, _ = two_runs
    jobs = pd.read_csv(d / "second" / "tables" / "jobs.csv")
    seed = jobs["job"].map(lambda n: read_record(d / "second" / str(n))["config"]["seed"])  # the table has none
    assert dict(zip(seed, jobs["compile_state"])) == {0: "warm", 1: "cold"}
    assert (jobs["compile_bytes"] > 0).all()
    html = (d / "second" / "report.html").read_text()
    # beside the warm job's compile time, and only there, with the C++ files it still built
    # (its kernels' libraries came from the store: next to none)
    built = int(jobs.loc[seed == 0, "cpp_builds"].iloc[0])
    cold = int(jobs.loc[seed == 1, "cpp_builds"].iloc[0])
    assert built < cold / 4
    assert html.count(f"(warm; {built} C++ files built again)</span>" if built else "(warm)</span>") == 1
    assert html.count("(warm") == 1


def job_config(**over) -> dict:
    cfg = {"model": "resnet18", "batch_size": 8, "mode": "training", "autotune": False, "seed": 0,
           "compile_store": "/somewhere", "timeout_s": 60, "measure": {"timed_steps": 20}}
    return {**cfg, **over}


def test_the_key_ignores_what_changes_no_compile_and_keeps_what_does():
    assert cs.key(job_config()) == cs.key(job_config(timeout_s=5, measure={"timed_steps": 3}, compile_store="/x"))
    for change in ({"batch_size": 16}, {"autotune": True}, {"seed": 1}, {"model": "resnet34"}):
        assert cs.key(job_config(**change)) != cs.key(job_config()), change


def leave_blob(job_dir: Path, data: bytes, torch_version: str = "2.11.0+test", size: int | None = None) -> None:
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / cs.BLOB).write_bytes(data)
    (job_dir / cs.META).write_text(json.dumps({"torch": torch_version, "bytes": size or len(data),
                                               "cold_compile_s": 12.5, "tuned_configs": {}}))


def test_absorb_keeps_the_latest_compile_of_a_job_and_load_gives_it_back(tmp_path):
    store, cfg = tmp_path / "store", job_config()
    leave_blob(tmp_path / "a", b"first")
    assert cs.absorb(store, tmp_path / "a", cfg) == 5
    leave_blob(tmp_path / "b", b"second compile")
    assert cs.absorb(store, tmp_path / "b", cfg) == 14
    assert not (tmp_path / "b" / cs.BLOB).exists()  # the store holds it, the job folder not
    seed = cs.load(store, "2.11.0+test", cfg)
    assert seed.data == b"second compile" and seed.meta["cold_compile_s"] == 12.5
    assert cs.load(store, "2.12.0", cfg).data is None  # another torch: nothing
    assert cs.load(store, "2.11.0+test", job_config(batch_size=9)).data is None  # another job: nothing
    assert cs.absorb(store, tmp_path / "empty", cfg) is None  # a job that left none


def test_a_cpu_jobs_kernel_libraries_travel_with_its_blob_and_load_only_on_the_host_they_fit(tmp_path):
    """A CPU job's C++ kernel libraries: kept beside its blob, sent with it, put into the next
    run's Inductor cache on a host of the same CPU and compiler; on another, a note, and they
    build again. A later compile that leaves none takes the stale ones out of the store."""
    store, cfg, here = tmp_path / "store", job_config(), cpu_libraries.host_id()
    cache = tmp_path / "built"
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / "cab.main.so").write_bytes(b"\x7fELF kernel")
    (cache / "fxgraph").mkdir()
    (cache / "fxgraph" / "graph").write_text("not a library")
    libs, files = cpu_libraries.pack(cache)
    assert files == 1
    leave_blob(tmp_path / "a", b"blob")
    (tmp_path / "a" / cs.LIBS).write_bytes(libs)
    meta = json.loads((tmp_path / "a" / cs.META).read_text())
    (tmp_path / "a" / cs.META).write_text(json.dumps({**meta, "cpu_libs": {**here, "files": 1, "bytes": len(libs)}}))
    assert cs.absorb(store, tmp_path / "a", cfg) == 4 + len(libs)
    seed = cs.load(store, "2.11.0+test", cfg)
    assert seed.libs == libs
    (tmp_path / "job").mkdir(), (tmp_path / "job2").mkdir()
    placed = cs.place_seed(JobSpec("0", (), cfg, compile_seed=seed), tmp_path / "job").compile_seed
    assert placed.libs_file == cs.SEED_LIBS and placed.libs is None

    got = job_stores.seed_compile(placed, tmp_path / "job", tmp_path / "cache", "2.11.0+test")
    assert got["cpu_libraries"] == 1 and (tmp_path / "cache" / "ab" / "cab.main.so").read_bytes() == b"\x7fELF kernel"
    assert not (tmp_path / "cache" / "fxgraph").exists() and not (tmp_path / "job" / cs.SEED_LIBS).exists()
    assert got["bytes"] == 4 + len(libs)

    other = dataclasses.replace(placed, meta={**placed.meta, "cpu_libs": {"id": "0" * 16, "cpu": "another CPU",
                                                                    "compiler": "g++ 9"}})
    cs.place_seed(JobSpec("0", (), cfg, compile_seed=seed), tmp_path / "job2")
    got = job_stores.seed_compile(other, tmp_path / "job2", tmp_path / "cache2", "2.11.0+test")
    assert "cpu_libraries" not in got and not (tmp_path / "cache2").exists()
    assert f"built on another host (another CPU; g++ 9), this one is {here['cpu']}" in got["notes"][-1]

    leave_blob(tmp_path / "b", b"later")  # compiled again, on a GPU: no libraries
    cs.absorb(store, tmp_path / "b", cfg)
    assert cs.load(store, "2.11.0+test", cfg).libs is None and not list(store.glob(f"*/*{cs.LIBS_SUFFIX}"))


def test_the_seed_travels_beside_job_json_not_in_it(tmp_path):
    spec = JobSpec("0", (), job_config(), compile_seed=StoredCompile(store="s", torch="t", data=b"\x00blob", meta={}))
    placed = cs.place_seed(spec, tmp_path)
    assert (tmp_path / cs.SEED).read_bytes() == b"\x00blob"
    assert placed.compile_seed.data is None and placed.compile_seed.file == cs.SEED
    assert spec.compile_seed.data == b"\x00blob"  # a new spec: the driver's is as it was (a retry places it again)
    assert JobSpec.from_json(json.loads(json.dumps(placed.to_json()))) == placed  # what job.json gets, read back
    nothing = cs.place_seed(dataclasses.replace(spec, compile_seed=dataclasses.replace(spec.compile_seed, data=None)),
                           tmp_path)
    assert nothing.compile_seed.file is None and not (tmp_path / cs.SEED).exists()


def test_a_stored_compile_of_another_torch_or_one_that_does_not_load_costs_a_cold_compile(tmp_path):
    seed = StoredCompile(store="s", file=cs.SEED, meta={"torch": "2.11.0+other", "cold_compile_s": 3.0})
    (tmp_path / cs.SEED).write_bytes(b"x")
    (tmp_path / cs.SEED_LIBS).write_bytes(b"libraries")
    got = job_stores.seed_compile(dataclasses.replace(seed, libs_file=cs.SEED_LIBS), tmp_path, tmp_path / "cache", "2.14.1")
    assert got["loaded"] is None and "not used" in got["notes"][0]
    assert not (tmp_path / cs.SEED).exists() and not (tmp_path / cs.SEED_LIBS).exists()  # not carried back
    (tmp_path / cs.SEED).write_bytes(b"x")
    # a corrupt blob: torch refuses it (its checksum), the job compiles cold and says so
    seed.meta["torch"] = "2.14.1"
    got = job_stores.seed_compile(seed, tmp_path, tmp_path / "cache", "2.14.1")
    assert got["loaded"] is None and "compiling cold" in got["notes"][-1]


def test_a_jobs_compile_that_cannot_be_kept_is_a_note_in_its_record(tmp_path):
    (tmp_path / cs.BLOB).write_bytes(b"blob")
    (tmp_path / cs.META).write_text("{ not json")
    spec = JobSpec("0", (), job_config(compile_store=str(tmp_path / "store")))
    record = exchange.bring_back(spec, tmp_path, {**new_record(spec, tmp_path), "status": "ok"})
    assert "could not be kept" in record["timings"]["compile_store"]["notes"][0]
    assert read_record(tmp_path)["timings"]["compile_store"]["notes"]  # written where the sweep reads it


def test_tuned_configs_round_trip_and_stay_inside_the_cache(tmp_path):
    """The files Inductor writes for a Triton kernel's chosen config (a GPU's; made here by hand)."""
    src = tmp_path / "src"
    (src / "ab").mkdir(parents=True)
    (src / "ab" / "k1.best_config").write_text('{"XBLOCK": 128, "num_warps": 4, "found_by_coordesc": true}')
    (src / "ab" / "k1.py").write_text("# a kernel, not a config")
    files = kernel_configs.tuned_configs(src)
    assert files == {"ab/k1.best_config": '{"XBLOCK": 128, "num_warps": 4, "found_by_coordesc": true}'}
    dst = tmp_path / "dst"
    (dst / "ab").mkdir(parents=True)
    (dst / "ab" / "k1.best_config").write_text('{"XBLOCK": 64, "found_by_coordesc": false}')  # as a blob left it
    assert kernel_configs.put_tuned_configs(dst, {**files, "../evil.best_config": "x", "ab/k.py": "x"}) == 1
    assert (dst / "ab" / "k1.best_config").read_text() == files["ab/k1.best_config"]
    assert not (tmp_path / "evil.best_config").exists() and not (dst / "ab" / "k.py").exists()


def test_the_cpp_builds_are_counted_however_quick_they_were():
    """Inductor's timers are kept for the costliest few, and compile_file (the C++ files it
    built) always: builds a compiler cache made quick fell out of the costliest 15, and a
    cold CPU compile read "0 C++ files built"."""
    from sweeper.torch_internals.probes import top_timers

    metrics = {f"phase_{i}": [1.0 + i] for i in range(20)} | {"compile_file": [0.01] * 43}
    kept = top_timers(metrics, 15)
    assert len(kept) == 16 and list(kept)[:15] == [f"phase_{i}" for i in range(19, 4, -1)]
    assert kept["compile_file"] == [43, 0.43] and list(kept)[-1] == "compile_file"  # costliest first still
    assert cpp_builds({"compile_timers": kept}) == 43
    assert "compile_file" not in top_timers({k: v for k, v in metrics.items() if k != "compile_file"}, 15)


def test_compile_state_tells_cold_seeded_and_warm_apart():
    assert compile_state({}) == "cold"
    assert compile_state({"autotune_store": {"seeded_entries": 12}}) == "seeded"
    assert compile_state({"autotune_store": {"seeded_entries": 12}, "compile_cache": {"fxgraph_hits": 1}}) == "warm"
    assert compile_state({"compile_cache": {"fxgraph_hits": 0, "fxgraph_misses": 2}}) == "cold"


def test_a_resumed_job_counts_the_compile_of_its_stopped_runs():
    """The jobs table's compile_s_before: what the runs a resumed job went on from had
    compiled (as the H200 headline's mixnet_l job: 1273.8 s in its first sitting)."""
    from sweeper.reporting.compile_state import compile_s_before

    runs = [{"status": "cancelled", "stopped_in": "compile", "phase_s_at_stop": 1273.8},
            {"status": "timeout", "stopped_in": "microbench", "phase_s_at_stop": 30.0},  # its compile had ended
            {"status": "cancelled", "stopped_in": "compile", "phase_s_at_stop": 100.0}]
    assert compile_s_before({"autotune_store": {"earlier_attempts": runs}}) == 1373.8
    assert compile_s_before({"autotune_store": {"seeded_entries": 12}}) is None and compile_s_before({}) is None


def test_the_default_store_is_a_folder_of_the_users_and_off_turns_it_off():
    assert cs.shared_by({"compile_store": "~/.cache/sweeper/compile"})
    for off in ("off", None, "none", False):
        assert not cs.shared_by({"compile_store": off})
    assert os.environ["SWEEPER_COMPILE_STORE"]  # the tests' own (conftest.py), never the user's


def test_h200_a_rerun_from_the_store_runs_the_same_kernels_and_flags_nothing(tmp_path):
    """resnet18 b32 inference, autotune on/off x CUDA graphs off/on, on one H200, run cold
    and then again from the compile store (tests/fixtures/h200/compile_store): every job
    warm, the same kernels launched as often, nothing flagged, compile times kept apart."""
    from conftest import sweep_from_fixture

    src = Path(__file__).parent / "fixtures" / "h200" / "compile_store"
    cold, warm = (sweep_from_fixture(src / n, tmp_path / n) for n in ("cold", "warm"))
    for n in range(4):
        a, b = read_record(cold / str(n)), read_record(warm / str(n))
        assert compile_state(b["timings"]) == "warm" and compile_state(a["timings"]) in ("cold", "seeded")
        assert b["timings"]["compile_s"] < a["timings"]["compile_s"] / 2
        assert step_kernels(a) == step_kernels(b) and a["step"]["kernel_launches"] == b["step"]["kernel_launches"]
    proc = subprocess.run([sys.executable, "-m", "sweeper.history", "compare", str(warm), str(cold),
                           "--kernels", "--fail-on-regression"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "0 of 4 jobs flagged" in proc.stdout
    assert proc.stdout.count("(cold -> warm: not comparable)") == 3 and "(seeded -> warm: not comparable)" in proc.stdout
    assert "appeared" not in proc.stdout and "vanished" not in proc.stdout  # the same kernels by name and source


def test_h200_a_failed_microbenchmark_is_counted_and_noted(tmp_path):
    """In that cold run one selected kernel of job 1 (autotune with CUDA graphs, seeded from
    the autotune store) failed its microbenchmark (its kernel file was missing): the jobs
    table counts it, with its reason, and the report's notes name the job; the others
    failed none."""
    from conftest import sweep_from_fixture

    from sweeper.reporting.load import load_sweep
    from sweeper.reporting.notes import all_notes
    from sweeper.reporting.tables import jobs_table

    cold = sweep_from_fixture(Path(__file__).parent / "fixtures" / "h200" / "compile_store" / "cold", tmp_path / "cold")
    jobs = jobs_table(list(load_sweep(cold)[1].values()))
    assert jobs["microbench_failed"].tolist() == [0, 1, 0, 0] and jobs["microbench_kernels"].tolist() == [14, 14, 11, 12]
    assert jobs["microbench_error"].iloc[1].startswith("FileNotFoundError") and jobs["microbench_error"].isna().sum() == 3
    noted = [n for n in all_notes(jobs) if n.startswith("microbenchmarks failed")]
    assert len(noted) == 1 and "#1 (1 of 14 kernels; the first: FileNotFoundError" in noted[0] and "#0" not in noted[0]
