"""tasks/gc_watch.py: collections counted per phase, and paused() for timed loops."""

import gc

from tasks.gc_watch import GcWatch, paused, set_pause


def test_collections_are_counted_in_the_phase_they_ran():
    watch = GcWatch().install()
    try:
        watch.phase = "compile"
        gc.collect()
        gc.collect(0)
        watch.phase = "time_modules"
        gc.collect()
    finally:
        watch.uninstall()
    gc.collect()  # after uninstall: not counted
    rep = watch.report()
    assert rep["compile"]["collections"] == 2 and rep["compile"]["full"] == 1
    assert rep["time_modules"]["collections"] == 1 and rep["time_modules"]["full"] == 1
    assert rep["compile"]["seconds"] >= rep["compile"]["longest_s"] > 0
    assert watch._callback not in gc.callbacks


def test_paused_turns_collection_off_and_back_on():
    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    # a collector that was off before stays off
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_pause_can_be_switched_off():
    set_pause(False)
    try:
        with paused():
            assert gc.isenabled()
    finally:
        set_pause(True)
