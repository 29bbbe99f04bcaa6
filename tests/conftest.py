import contextlib
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True, scope="session")
def _own_autotune_store(tmp_path_factory):
    """Sweeps run by the tests keep their autotune and compile stores apart from the user's
    (~/.cache/sweeper/autotune and compile, conf/config.yaml), the host's instruction-set
    probes apart from its own folder, and their jobs' scratch folders apart from the
    machine's (pytest removes them with the run's other old folders); a test that needs its
    own sets its own."""
    # one folder for the whole run: under pytest-xdist (make test's two workers) the
    # workers' sessions share it, so that a compile one worker made is warm for the other;
    # make test names one for all its runs (SWEEPER_TEST_SHARED): the workers', the `beside`
    # run's beside them and the `alone` run's after
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("SWEEPER_TEST_SHARED"):
        shared = Path(os.environ["SWEEPER_TEST_SHARED"])
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    for key, name in (("SWEEPER_AUTOTUNE_STORE", "autotune_store"), ("SWEEPER_COMPILE_STORE", "compile_store"),
                      # and the host's instruction-set probes (tasks/cpu_libraries.py)
                      ("SWEEPER_CPU_PROBES", "cpu_probes"),
                      # and the device's roofs, measured by the run's first job (not the user's own)
                      ("SWEEPER_ROOFS", "roofs"),
                      # and the launcher's scratch folder: not the machine's /tmp/sweeper-scratch,
                      # where the sweeps of another test run (or of a user) run at the same time
                      ("SWEEPER_SCRATCH", "scratch")):
        (shared / f"session_{name}").mkdir(exist_ok=True)
        os.environ[key] = str(shared / f"session_{name}")
    # Inductor's C++ compiler: g++ behind a cache of the kernel libraries it built, shared by
    # every sweep of the run (tests/tools/cxx_cache.sh says why); the tests' cold compiles
    # still run all of Inductor, and g++ on each kernel the first time
    os.environ["CXX"] = str(Path(__file__).parent / "tools" / "cxx_cache.sh")
    os.environ["SWEEPER_TEST_CXX_CACHE"] = str(shared / "session_cxx_cache")
    # One compute thread a job, whatever CPUs Ray gives it (Ray leaves a set OMP_NUM_THREADS
    # alone): Inductor's CPU kernels, and so its cache key and the compile store's entry,
    # depend on the thread count, and jobs of 1 and of 2 CPUs made each load of the other's
    # entry a cold compile that then replaced it. One thread also keeps two workers' jobs
    # from waiting on each other's threads on a 2-core machine. A test that sets its own wins.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def ray_tmpdir():
    """A RAY_TMPDIR of the test's own, for a Ray whose files (`ray start`'s address file
    among them) no later ray.init on this machine may find; short, because Ray's socket
    paths lie under it."""
    import tempfile

    path = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


H200 = FIXTURES / "h200"  # captured on the GPU machine: see tests/fixtures/README.md


def read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as f:
            return f.read()
    return path.read_text()


def sweep_from_fixture(src: Path, dest: Path) -> Path:
    """A sweep folder at dest from a fixture folder of GPU records (<n>.result.json.gz and
    summary.json.gz), the summary's job folders pointed at dest."""
    summary = json.loads(gzip.decompress((src / "summary.json.gz").read_bytes()))
    for job in summary["jobs"]:
        (dest / str(job["num"])).mkdir(parents=True)
        (dest / str(job["num"]) / "result.json").write_bytes(
            gzip.decompress((src / f"{job['num']}.result.json.gz").read_bytes()))
        job["dir"] = str(dest / str(job["num"]))
    (dest / "summary.json").write_text(json.dumps(summary))
    return dest


def fixture_records(folder: Path) -> list[dict]:
    """The records of a fixture folder (<n>.result.json.gz beside summary.json.gz) in the
    summary's order, each with its job number as its id (the jobs table's `job`)."""
    summary = json.loads(gzip.decompress((folder / "summary.json.gz").read_bytes()))
    records = []
    for job in summary["jobs"]:
        rec = json.loads(gzip.decompress((folder / f"{job['num']}.result.json.gz").read_bytes()))
        rec["job"] = dict(rec.get("job") or {}, id=str(job["num"]))
        records.append(rec)
    return records


@contextlib.contextmanager
def moto_s3():
    """moto's S3 server on 127.0.0.1 with a bucket `sweeps`, and the credentials every
    process of a test (a sweep's driver, the Ray nodes it starts) reads from the
    environment, put back on exit. Yields the storage URI of `sweeps/nightly` and a client."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "sweeper-test", "AWS_SECRET_ACCESS_KEY": "sweeper-test",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1")
        client.create_bucket(Bucket="sweeps")
        yield f"s3://sweeps/nightly?endpoint_override=127.0.0.1:{port}&scheme=http&region=us-east-1", client
    finally:
        server.stop()
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture
def h200():
    return H200


@pytest.fixture
def resnet18_record():
    return json.loads(read_text(H200 / "resnet18_result.json.gz"))


@pytest.fixture
def mixnet_record():
    return json.loads(read_text(H200 / "mixnet_l_result.json.gz"))


def chromium() -> str:
    """The headless browser for the report tests: CI must have it (.ci/run installs it)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    if os.environ.get("CI"):
        pytest.fail("Chromium is not installed: .ci/run installs Debian's chromium package")
    pytest.skip("no Chromium here (apt-get install chromium)")


# The test files that take longest on 2 cores, longest first (each file's tests summed, from
# .ci/run's --durations). make test's two workers take whole files in collection order
# (--dist loadfile --no-loadscope-reorder): these first and the short files after, so that
# the last files to end are short ones, not one worker's long file while the other idles
# (pytest-xdist's own order, by number of tests, left the builds file to the end). A file
# missing here just runs later; the order is a hint.
# The same order holds in the `beside` run next to the workers, which takes the tests
# marked `beside` out of these files (the whole of test_autotune_partial.py,
# test_autotune_cancelled.py and test_spare_gpus.py, and the crash/hang test): the
# twice-stalled job's file first, so that the crash/hang test and the files after it find
# the run's compiles of their models warm in the store, which the workers' first minutes
# put there.
LONGEST_FIRST = ["test_autotune_partial.py", "test_ray_launcher.py", "test_autotune_advice.py", "test_history.py", "test_compile_store.py",
                 "test_builds.py", "test_job_cpu.py", "test_packing.py", "test_autotune_store.py", "test_validate.py",
                 "test_storage.py", "test_kernel_configs.py", "test_autotune_cancelled.py", "test_spare_gpus.py",
                 "test_attribution_check.py", "test_own_cluster.py", "test_confirm.py",
                 "test_report_scale.py", "test_hta.py", "test_faults_round4.py", "test_bad_summaries.py",
                 "test_gpu_lease.py", "test_report.py", "test_full_disk.py"]


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))  # stable: the rest as collected


def change_detection_bench():
    """bench/change_detection.py as a module: its history generator (real models' kernels,
    real nights' noise, tables as the aggregate writes them) for the change-point tests."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "change_detection", Path(__file__).resolve().parent.parent / "bench" / "change_detection.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["change_detection"] = mod  # its dataclasses look themselves up by module
    spec.loader.exec_module(mod)
    return mod
