"""python -m sweeper [key=value ...]: run a sweep of jobs (see conf/config.yaml).

Comma lists sweep without -m (the primary config sets hydra.mode=MULTIRUN):
    python -m sweeper model=mixnet_l,densenet121 autotune=on,off

Every sweep runs through sweeper's launcher (hydra_plugins/sweeper_ray: an embedded local
Ray on this machine, or a cluster), one lifecycle for all its jobs; a launcher that would
hand Hydra's task function the jobs one by one is refused before anything runs
(sweeper/sweep/hydra_callbacks.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from sweeper.sweep.hydra_setup import register
from sweeper.sweep.control import sigterm_as_interrupt
from sweeper.sweep.show_config import sweep_configs, wants_config, without_multirun
from sweeper.sweep.overrides import check as check_overrides
from sweeper.sweep.validate import stop_on_problem

register()


# An absolute path: Hydra resolves a relative one against the calling file under
# `python -m sweeper`, but against a module path ("conf", not found) under the installed
# `sweeper` console script. conf/ sits beside the package (an editable install).
CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def run_one(cfg: DictConfig) -> None:
    """Hydra's task function. Sweeper's launcher runs the jobs itself (each in a process of
    its own, `python -m tasks.job`) and never calls it; the ways Hydra would (another
    launcher, hydra.mode=RUN) are refused before it (hydra_callbacks.Preflight)."""
    raise RuntimeError("sweeper's jobs run through hydra/launcher=sweeper_ray, not Hydra's task function")


def main() -> None:
    from sweeper.command_line import closing_pipe_quietly

    closing_pipe_quietly(_main)()


def _main() -> None:
    """The launcher ends its sweep itself (sm.close_sweep, exiting non-zero when a job
    failed). `sweeper store ...` is the autotune store's own command (sweeper/stores/command.py)."""
    if sys.argv[1:2] == ["store"]:
        from sweeper.stores import command

        sys.exit(command.main(sys.argv[2:]))
    if not any(a in ("--help", "-h", "--hydra-help") for a in sys.argv[1:]):  # bad keys and values: exit 2
        stop_on_problem(check_overrides, sys.argv[1:], CONF_DIR)
    if wants_config(sys.argv[1:]):  # --cfg over a sweep: each job's config (show_config.py)
        shown = sweep_configs(sys.argv[1:], CONF_DIR)
        if shown is not None:
            for num, (overrides, text) in enumerate(shown):
                print(f"# job {num}: {' '.join(overrides)}\n{text}")
            return
        sys.argv = [sys.argv[0], *without_multirun(sys.argv[1:])]
    sigterm_as_interrupt()
    try:
        run_one()
    except KeyboardInterrupt:  # before the launcher took over (it records and exits itself)
        sys.exit(130)


if __name__ == "__main__":
    main()
