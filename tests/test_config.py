import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from sweeper.sweep.hydra_setup import register

ROOT = Path(__file__).resolve().parent.parent
CONF = str(ROOT / "conf")
register()


def cfg(*overrides):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_defaults_are_typed():
    c = cfg()
    assert c.model == "resnet18"
    assert c.amp is True and c.cudagraphs is False and c.autotune is False
    assert c.mode == "training" and c.device == "auto"
    assert c.batch_size is None and c.image_size is None
    assert c.measure.timed_steps > 0


def test_on_off_overrides_become_booleans():
    c = cfg("autotune=on", "cudagraphs=on", "amp=off", "batch_size=8", "mode=inference")
    assert c.autotune is True and c.cudagraphs is True and c.amp is False
    assert c.batch_size == 8 and c.mode == "inference"


def test_typo_in_key_is_rejected():
    with pytest.raises(ConfigCompositionException, match="modle"):
        cfg("modle=resnet18")


def test_bad_values_are_rejected():
    with pytest.raises(ConfigCompositionException):
        cfg("mode=train")
    with pytest.raises(ConfigCompositionException):
        cfg("batch_size=many")
    with pytest.raises(ConfigCompositionException):
        cfg("device=tpu")


def test_primary_config_sweeps_without_dash_m():
    raw = OmegaConf.load(Path(CONF) / "config.yaml")
    assert raw.hydra.mode == "MULTIRUN"


def test_extra_inductor_options_are_flattened_checked_and_applied():
    import torch._inductor.config as inductor_config

    from sweeper import inductor_options as io

    flat = io.flatten({"autotune_in_subproc": True, "triton": {"cudagraph_trees": False}})
    assert flat == {"autotune_in_subproc": True, "triton.cudagraph_trees": False}
    assert io.problems(flat) == []
    (msg,) = io.problems({"autotune_in_subproces": True})
    assert "inductor.autotune_in_subproces: not an option" in msg and "closest: autotune_in_subproc" in msg
    with inductor_config.patch({}):  # restores every option on exit
        before = io.current(flat)
        io.apply(flat)
        assert io.current(flat) == flat != before
        assert inductor_config.triton.cudagraph_trees is False


def test_inductor_options_name_the_job():
    from sweeper.reporting.tables import job_key, job_label

    cfg = {"model": "resnet18", "batch_size": 32, "mode": "inference", "autotune": True,
           "inductor": {"autotune_in_subproc": True}}
    assert job_label(cfg).endswith("autotune autotune_in_subproc=True")
    assert job_key(cfg) != job_key(dict(cfg, inductor={}))
    # a job cancelled before it started: its batch size is the model's default, unresolved
    assert job_label(dict(cfg, batch_size=None)).startswith("resnet18 default batch infer")


def _sweeper(*args):
    return subprocess.run([sys.executable, "-m", "sweeper", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("args", [["-m", "sweeper", "--help"], ["-m", "sweeper", "--cfg", "job"],
                                  ["-m", "sweeper.history", "--help"], ["-m", "sweeper.store", "--help"]])
def test_a_reader_that_stops_early_ends_the_command_quietly(args):
    """`sweeper --help | head` ended in a BrokenPipeError traceback: a closed pipe ends the
    command quietly (exit code 1, Python's own advice), nothing on stderr."""
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()[-2000:]
    assert proc.returncode in (0, 1)


def test_help_lists_every_declared_key_with_its_values_default_and_meaning():
    import dataclasses

    from sweeper.sweep.config import JobConfig, MeasureConfig

    proc = _sweeper("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout
    keys = [f.name for f in dataclasses.fields(JobConfig) if f.name != "measure"]
    keys += [f"measure.{f.name}" for f in dataclasses.fields(MeasureConfig)]
    lines = text.splitlines()
    for key in keys:  # each key's line, then its meaning below it: none is left without one
        # the key's row (not the usage line "python -m sweeper ...", which starts with `python` too)
        at = next((i for i, line in enumerate(lines) if line.split() and line.split()[0] == key
                   and ", default " in line), None)
        assert at is not None, f"{key} has no row with its values and default"
        assert lines[at + 1].startswith(" " * 10) and lines[at + 1].strip(), f"{key} has no meaning"
    assert "autotune                        on|off, default off" in text
    assert "mode                            training|inference, default training" in text
    assert "python -m sweeper model=mixnet_l,densenet121 autotune=on,off" in text  # the README's example
    assert "--hydra-help" in text and "powered by Hydra" not in text


def test_cfg_job_shows_each_job_of_a_sweep():
    for dash_m in ([], ["-m"]):
        proc = _sweeper(*dash_m, "model=resnet18,resnet50", "batch_size=8", "--cfg", "job")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "# job 0: model=resnet18 batch_size=8" in proc.stdout
        assert "# job 1: model=resnet50 batch_size=8" in proc.stdout and "hydra:" not in proc.stdout
    single = _sweeper("-m", "model=resnet50", "--cfg", "job")  # one job too, -m or not
    assert single.returncode == 0 and single.stdout.startswith("# job 0: model=resnet50"), single.stderr[-2000:]
    assert "\nmodel: resnet50\n" in single.stdout


def test_cfg_job_and_the_dry_run_show_what_each_job_will_run_with():
    """Not `batch_size: null` and `device: auto`, but what the job resolves them to here (a
    CPU machine: cpu, the CPU batch), said in a comment; a job a CPU skips is marked."""
    proc = _sweeper("model=densenet121", "cudagraphs=on,off", "--cfg", "job")
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, second = proc.stdout.split("# job 1:")
    assert "# device: auto -> cpu (no GPU here)" in first and "\ndevice: cpu\n" in first
    assert "# batch_size: unset -> 2 (the CPU default)" in first and "\nbatch_size: 2\n" in first
    assert "# SKIPPED here: cudagraphs=on needs a CUDA device" in first and "SKIPPED" not in second
    listed = _sweeper("model=densenet121", "cudagraphs=on,off", "dry_run=true")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "(1 would be skipped here)" in listed.stdout
    assert "device cpu (no GPU here), batch 2 (the CPU default); SKIPPED here: cudagraphs=on needs a CUDA device" \
        in listed.stdout


def test_the_scratch_folder_defaults_to_sweeper_scratch_where_set(tmp_path):
    """$SWEEPER_SCRATCH moves the launcher's node-local scratch folder (the tests' sweeps use
    a folder of their run's own, never the machine's /tmp/sweeper-scratch, where another
    test run's or a user's sweeps run)."""
    code = (f"from hydra import compose, initialize_config_dir\n"
            f"from sweeper.sweep.hydra_setup import register\n"
            f"register()\n"
            f"with initialize_config_dir(config_dir={CONF!r}, version_base='1.3'):\n"
            f"    print(compose(config_name='config', return_hydra_config=True).hydra.launcher.scratch_dir)\n")
    for env, expected in ((str(tmp_path / "scratch"), str(tmp_path / "scratch")), ("", "/tmp/sweeper-scratch")):
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             env={k: v for k, v in os.environ.items() if k != "SWEEPER_SCRATCH"}
                             | ({"SWEEPER_SCRATCH": env} if env else {}))
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().splitlines()[-1] == expected


def test_each_key_is_declared_once_and_every_check_reads_the_declaration():
    """config.py's declarations (type, default, meaning, least value) are what the help, the
    command line's check and the composed jobs' check read: every key declared with a least
    value is refused below it by both checks, with one message. The failure tests' hook is
    no key of the config (tasks/faults.py): a user's `debug_fault=` is an unknown key."""
    import dataclasses

    from sweeper.sweep.config import JobConfig, MeasureConfig, declared_keys
    from sweeper.sweep.help import help_text
    from sweeper.sweep.overrides import problems
    from sweeper.sweep.validate import job_problems

    keys = declared_keys()
    assert set(keys) == ({f.name for f in dataclasses.fields(JobConfig)} - {"measure"}
                         | {f"measure.{f.name}" for f in dataclasses.fields(MeasureConfig)})
    assert keys["timeout_s"].default == 3600 and keys["timeout_s"].minimum == 0
    assert "killed" in keys["timeout_s"].doc  # the comment above the field
    bounded = {name: key for name, key in keys.items() if key.minimum is not None}
    assert {"batch_size", "image_size", "timeout_s", "measure.timed_steps", "measure.steady_loop_s"} <= set(bounded)
    for name, key in bounded.items():
        low = float(key.minimum - 1) if key.type is float else int(key.minimum - 1)  # measure's spans: floats
        on_the_command_line = problems([f"{name}={low}"], set())
        top, _, sub = name.partition(".")
        composed = job_problems({"model": "resnet18", top: {sub: low}} if sub else {"model": "resnet18", name: low})
        assert len(on_the_command_line) == 1 and on_the_command_line == composed, (name, on_the_command_line, composed)
        assert on_the_command_line[0].startswith(f"{name}={low}: must be")
    assert "debug_fault" not in keys and "debug_fault" not in help_text()
    unknown = problems(["debug_fault=crash"], set())
    assert len(unknown) == 1 and unknown[0].startswith("debug_fault")


def test_the_failure_tests_hook_names_a_fault_by_job_number():
    """SWEEPER_TEST_FAULTS (tasks/faults.py): a fault for given job numbers, or for all."""
    from tasks.faults import fault_for

    assert fault_for("1", "0=crash,1=hang") == "hang" and fault_for("2", "0=crash,1=hang") is None
    assert fault_for("7", "*=raise") == "raise" and fault_for("0", "0=crash,*=hang") == "crash"
    assert fault_for("0", "") is None
