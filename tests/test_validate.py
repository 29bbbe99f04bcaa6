import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper.sweep.validate import SweepConfigError, check_sweep, job_problems

ROOT = Path(__file__).resolve().parent.parent


def base(**kw):
    cfg = {"model": "resnet18", "batch_size": None, "image_size": None, "timeout_s": 3600,
           "measure": {"timed_steps": 20, "eager": True}, "device": "auto"}
    cfg.update(kw)
    return cfg


def test_good_job_has_no_problems():
    assert job_problems(base()) == []


def test_each_bad_value_is_named():
    assert "Closest timm names: resnet18" in job_problems(base(model="resnet_18"))[0]
    assert job_problems(base(batch_size=-3)) == ["batch_size=-3: must be a positive integer (or left unset for the default)"]
    assert "image_size=0" in job_problems(base(image_size=0))[0]
    assert "measure.timed_steps=0" in job_problems(base(measure={"timed_steps": 0}))[0]
    assert "measure.module_span_s=-1.0: must be 0 or more" in job_problems(base(measure={"module_span_s": -1.0}))[0]
    assert job_problems(base(measure={"module_span_s": 0.0})) == []


def test_check_sweep_lists_every_problem_and_cuda_without_gpu():
    with pytest.raises(SweepConfigError) as e:
        check_sweep([(0, ["model=resnet_18"], base(model="resnet_18")),
                     (1, ["device=cuda"], base(device="cuda"))], gpus_available=0)
    text = str(e.value)
    assert "2 problem(s)" in text and "job #0 (model=resnet_18)" in text and "no GPU here" in text
    check_sweep([(1, ["device=cuda"], base(device="cuda"))], gpus_available=1)


def test_bad_input_stops_the_sweep_in_seconds_with_no_job_folder(tmp_path):
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet_18,resnet18", "batch_size=-1",
                           "+inductor.autotune_in_subproces=true", f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no job was run" in proc.stderr and "Closest timm names: resnet18" in proc.stderr
    assert "batch_size=-1: must be a positive integer" in proc.stderr
    assert "inductor.autotune_in_subproces: not an option of torch._inductor.config" in proc.stderr
    assert "closest: autotune_in_subproc" in proc.stderr
    assert _left_nothing(tmp_path)
    assert time.time() - t0 < 60


def _new_sweep_dir(tmp_path):  # as Hydra's default outputs/DATE/TIME, none of it there yet
    return tmp_path / "outputs" / "2026-12-01" / "00-00-00"


def _left_nothing(tmp_path):  # a sweep that ran no job takes the folders it made away again
    return not (tmp_path / "outputs").exists()


def _sweep_with_address(tmp_path, address, timeout_s=5, env=None):
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18", f"hydra.launcher.address={address}",
                           f"hydra.launcher.connect_timeout_s={timeout_s}", f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert _left_nothing(tmp_path)
    assert time.time() - t0 < 30
    return proc.stderr


def test_cluster_address_that_does_not_answer_stops_in_seconds(tmp_path):
    err = _sweep_with_address(tmp_path, "127.0.0.1:9")
    assert "no Ray cluster at 127.0.0.1:9" in err and "TCP connect" in err and "RAY_ADDRESS" in err


def test_a_port_that_is_not_ray_stops_in_seconds_instead_of_hanging(tmp_path):
    # 127.0.0.2 is loopback too, and Ray dials it as given (127.0.0.1 it swaps for the
    # machine's address); the listener accepts TCP and never speaks Ray's protocol
    with socket.socket() as listener:
        listener.bind(("127.0.0.2", 0))
        listener.listen()
        address = f"127.0.0.2:{listener.getsockname()[1]}"
        err = _sweep_with_address(tmp_path, address, timeout_s=6)
    assert f"{address} accepts TCP connections but did not answer as a Ray cluster's GCS within 6 s" in err
    assert "Ray's GCS handshake" in err


def test_a_cluster_that_refuses_the_drivers_token_stops_in_seconds(tmp_path, ray_tmpdir):
    """A real Ray head with token authentication; the driver holds another token, or none."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    quiet = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ADDRESS"))}
    quiet["RAY_TMPDIR"] = ray_tmpdir  # `ray start` writes its address there, not where later tests look
    head_env = {**quiet, "HOME": str(tmp_path / "head"), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "a" * 32}
    # --block: the head's GCS and raylet end with this process (no `ray stop`, which would
    # stop every Ray of this user on the machine)
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", "--block", f"--port={port}",
                             "--num-cpus=1", "--include-dashboard=false", "--node-ip-address=127.0.0.1",
                             "--disable-usage-stats"], env=head_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    address = f"127.0.0.1:{port}"
    try:
        # the cluster's own token passes the same check the driver runs: it is the token that fails below
        deadline = time.time() + 60
        while True:
            probe = subprocess.run([sys.executable, "-m", "hydra_plugins.sweeper_ray._address", address], cwd=ROOT,
                                   env=head_env, capture_output=True, text=True, timeout=60)
            if '"answered"' in probe.stdout or time.time() > deadline:
                break
            time.sleep(1)
        assert '"answered"' in probe.stdout, probe.stdout + probe.stderr
        for token in ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "b" * 32}, {}):  # another token; none at all
            home = tmp_path / f"driver{len(token)}"
            # a check child given 15 s: its cold `import ray` alone can take seconds on a loaded 2-core machine
            err = _sweep_with_address(tmp_path, address, timeout_s=15, env={**quiet, "HOME": str(home), **token})
            assert f"the Ray cluster at {address}" in err and "refused this driver's credentials" in err, err
            assert "RAY_AUTH_TOKEN" in err and "~/.ray/auth_token" in err
    finally:
        head.terminate()
        head.wait(timeout=60)


def test_ray_client_address_is_refused_with_what_to_do_instead(tmp_path):
    err = _sweep_with_address(tmp_path, "ray://127.0.0.1:10001")
    assert "ray:// (Ray Client) is not supported" in err and "ray job submit" in err


def test_unwritable_outputs_folder_stops_before_any_job(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18", f"hydra.sweep.dir={blocker}/sweep"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert f"the sweep folder {blocker}/sweep cannot be written" in proc.stderr and "hydra.sweep.dir" in proc.stderr


def test_device_cuda_without_a_gpu_stops_before_any_job(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    for extra in ([], ["dry_run=true"]):  # a dry run refuses as the real run does
        proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18", "device=cuda", *extra,
                               f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"], cwd=ROOT, capture_output=True,
                              text=True, timeout=180)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "device=cuda, but there is no GPU here; use device=auto or device=cpu" in proc.stderr
        assert "dry run:" not in proc.stdout
        assert _left_nothing(tmp_path)


def test_every_bad_value_of_the_command_line_is_listed_at_once(tmp_path):
    """Four problems in one command (the README promises every one): an unknown model among
    swept ones, a value outside on/off, a batch of 0 and CUDA without a GPU, all said before
    Hydra composes anything."""
    from sweeper.sweep.machine import nvml_gpus

    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet81,resnet18", "autotune=yes", "batch_size=0",
                           "device=cuda", f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr[-2000:]
    said = ["unknown model 'resnet81'", "autotune=yes: one of on, off",
            "batch_size=0: must be a positive integer (or left unset for the default)"]
    if nvml_gpus()[0] == 0:
        said.append("device=cuda, but there is no GPU here; use device=auto or device=cpu")
    assert f"{len(said)} problem(s) found before starting" in proc.stderr
    assert all(line in proc.stderr for line in said), proc.stderr
    assert "resnet18:" not in proc.stderr and _left_nothing(tmp_path)
    # a chosen config file may name a cluster (hydra.launcher.address): CUDA is left to the
    # check after composition, which knows the cluster
    from sweeper.sweep.overrides import wants_cuda_without_gpu

    assert not wants_cuda_without_gpu(["+sweep=nightly", "device=cuda"], {"sweep", "case"})
    assert not wants_cuda_without_gpu(["device=cuda", "hydra.launcher.address=10.0.0.1:6379"], set())
    assert wants_cuda_without_gpu(["device=cuda"], set()) == (nvml_gpus()[0] == 0)


def test_dry_run_lists_jobs_and_runs_none(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18,mixnet_l", "autotune=on,off",
                           "dry_run=true", f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dry run: 4 jobs" in proc.stdout
    assert "#3 model=mixnet_l autotune=off" in proc.stdout
    assert _left_nothing(tmp_path)
    # into a folder that was there before (a re-run's), it is left as it was
    (tmp_path / "kept").mkdir()
    subprocess.run([sys.executable, "-m", "sweeper", "model=resnet18", "dry_run=true", f"hydra.sweep.dir={tmp_path / 'kept'}"],
                   cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert (tmp_path / "kept").is_dir()


def test_a_200_job_sweep_is_refused_before_its_jobs_are_composed(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sweeper", "seed=range(0,200)",
                           f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "200 jobs (more than confirm_above=50)" in proc.stderr
    assert _left_nothing(tmp_path)


def test_a_grid_is_counted_from_the_command_line_before_hydra_builds_it(tmp_path):
    """Counted from the overrides (sweeper/sweep/control.grid_size), a 100,000-job grid is
    refused at once; Hydra, building each job's config first (200 took 25 s), would take
    hours. Sweeps Hydra alone can count (a glob) are still refused by the launcher."""
    from sweeper.sweep.control import grid_size

    assert grid_size(["seed=range(0,200)", "model=a,b", "autotune=on", "hydra.sweep.dir=/x"]) == 400
    assert grid_size(["+inductor.x=glob(*)"]) is None
    proc = subprocess.run([sys.executable, "-m", "sweeper", "seed=range(0,100000)", "model=resnet18",
                           f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "100000 jobs (more than confirm_above=50)" in proc.stderr
    assert _left_nothing(tmp_path)


def test_large_sweep_asks_for_confirmation(tmp_path):
    args = [sys.executable, "-m", "sweeper", "model=resnet18", "seed=0,1,2", "confirm_above=2",
            f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert "3 jobs (more than confirm_above=2)" in proc.stderr and "yes=true" in proc.stderr
    assert _left_nothing(tmp_path)
    listed = subprocess.run(args + ["dry_run=true"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "dry run: 3 jobs" in listed.stdout  # listing needs no confirmation


@pytest.mark.slow
def test_second_sweep_into_the_same_folder_refuses(tmp_path):
    import signal

    first = subprocess.Popen([sys.executable, "-m", "sweeper", "model=test_resnet",
                              "timeout_s=120", f"hydra.sweep.dir={tmp_path}"], cwd=ROOT,
                             env=dict(os.environ, SWEEPER_TEST_FAULTS="*=hang"),  # tasks/faults.py
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (tmp_path / "summary.json").exists():
            time.sleep(0.5)
        multirun = (tmp_path / "multirun.yaml").read_bytes()
        second = subprocess.run([sys.executable, "-m", "sweeper", "model=test_resnet", "batch_size=3",
                                 f"hydra.sweep.dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert second.returncode == 3
        assert "another sweep (pid" in second.stderr and str(tmp_path) in second.stderr
        # the refused sweep was stopped before Hydra wrote its multirun.yaml over the running one's
        assert (tmp_path / "multirun.yaml").read_bytes() == multirun and b"batch_size=3" not in multirun
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=120)


@pytest.mark.parametrize("override, says", [
    ("modle=resnet18", "modle: not a sweeper key (did you mean mode or model?)"),
    ("+modle=resnet18", "modle: not a sweeper key (did you mean mode or model?)"),
    ("autotune=yes", "autotune=yes: one of on, off"),  # OmegaConf would read yes as true
    ("+autotune=yes", "autotune=yes: one of on, off"),
    ("autotune=maybe", "autotune=maybe: one of on, off"),
    ("autotune=on,yes", "autotune=yes: one of on, off"),  # a swept value too
    ("mode=train", "mode=train: one of training, inference"),
    ("batch_size=eight", "batch_size=eight: an integer"),
])
def test_an_unknown_key_or_value_exits_2_with_sweepers_message_before_any_folder(tmp_path, override, says):
    """With or without a `+`, a bad key or value gets sweeper's message, naming the accepted
    keys or values, and exit code 2, as the README promises; nothing is created."""
    t0 = time.time()
    sweep_dir = tmp_path / "sweep"
    for extra in ([], ["dry_run=true"], ["--cfg", "job"]):
        proc = subprocess.run([sys.executable, "-m", "sweeper", override, *extra, f"hydra.sweep.dir={sweep_dir}"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert says in proc.stderr and "no job was run" in proc.stderr and "--help" in proc.stderr
        assert "Could not override" not in proc.stderr and "Traceback" not in proc.stderr
    assert not sweep_dir.exists()
    assert time.time() - t0 < 90


def test_on_off_keys_take_on_off_true_false():
    from sweeper.sweep.overrides import problems

    assert problems(["autotune=on,off", "amp=true", "cudagraphs=False", "measure.eager=off"], set()) == []
    assert problems(["cudagraphs=1"], set()) == ["cudagraphs=1: one of on, off"]
    # checked as the composed job holds them: a float key's 0 (turns it off), not an integer's
    assert problems(["measure.steady_loop_s=0", "measure.microbench_budget_pct=0"], set()) == []
    assert problems(["measure.timed_steps=0"], set()) == ["measure.timed_steps=0: must be a positive integer"]
    # groups and hydra's own keys are left to Hydra; inductor.* names are Inductor's config's
    assert problems(["+sweep=nightly", "hydra/launcher=basic", "hydra.sweep.dir=/x", "+inductor.max_autotune=true"],
                    {"sweep", "case"}) == []
    assert [p.split(":")[0] for p in problems(["+inductor.anything=1"], set())] == ["inductor.anything"]


def test_undeclared_keys_are_named_with_the_closest_declared_ones():
    assert job_problems(base(foo=1)) == [
        "foo: not a sweeper key (`python -m sweeper --help` lists the keys); a `+` in front does not make it one"]
    assert "modle: not a sweeper key (did you mean mode or model?)" in job_problems(base(modle="resnet50"))[0]
    said = job_problems(base(measure={"timed_step": 3}))
    assert len(said) == 1 and said[0].startswith("measure.timed_step: not a sweeper key (did you mean measure.timed_steps")
    # inductor.* is a free-form group, checked against the installed torch instead
    assert job_problems(base(inductor={"max_autotune": True})) == []
    assert [p.split(":")[0] for p in job_problems(base(inductor={"anything": 1}))] == ["inductor.anything"]


@pytest.mark.parametrize("overrides, named", [
    (["+foo=1", "dry_run=true"], ["foo: not a sweeper key"]),  # what Hydra's own error suggests for foo=1
    (["+modle=resnet50", "dry_run=true"], ["modle: not a sweeper key (did you mean mode or model?)"]),
    (["+foo=1,2"], ["foo: not a sweeper key"]),  # swept: named once, before any job is composed
])
def test_a_key_added_with_plus_stops_the_sweep(tmp_path, overrides, named):
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "sweeper", *overrides, f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert all(n in proc.stderr for n in named) and "no job was run" in proc.stderr
    assert _left_nothing(tmp_path)
    assert time.time() - t0 < 60


NAMES_CHECK = r"""
import json, sys
from sweeper.models import UnknownModelError, check_model_name
check_model_name("resnet18")
try:
    check_model_name("resnet_18")
    said = ""
except UnknownModelError as e:
    said = str(e)
print(json.dumps({"timm_imported": "timm" in sys.modules, "said": said}))
"""


def test_model_names_are_kept_so_that_later_checks_skip_importing_timm(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    runs = [json.loads(subprocess.run([sys.executable, "-c", NAMES_CHECK], cwd=ROOT, env=env, capture_output=True,
                                      text=True, timeout=120, check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert runs[0]["timm_imported"] and not runs[1]["timm_imported"]  # the first run wrote the list
    (names,) = (tmp_path / "sweeper").glob("timm-*-models.txt")
    assert "resnet18" in names.read_text().split()
    for r in runs:  # the same answer either way
        assert "Closest timm names: resnet18" in r["said"]


def test_the_installed_commands_work_from_any_folder(tmp_path):
    """The console script finds its config wherever it is run from (not only the checkout)."""
    script = Path(sys.executable).parent / "sweeper"
    proc = subprocess.run([str(script), "dry_run=true", f"hydra.sweep.dir={_new_sweep_dir(tmp_path)}"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "dry run: 1 job " in proc.stdout and "#0 (the defaults)" in proc.stdout
    for module in ("sweeper.history", "sweeper.aggregate"):
        helped = subprocess.run([sys.executable, "-m", module, "--help"], cwd=tmp_path, capture_output=True,
                                text=True, timeout=120)
        assert helped.returncode == 0 and "usage:" in helped.stdout, helped.stderr[-2000:]
