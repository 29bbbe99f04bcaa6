from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from sweeper.sweep.config import register

CONF = str(Path(__file__).resolve().parent.parent / "conf")
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

    from sweeper.sweep import inductor_options as io

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
