"""The GPU's state in every timing (sweeper/analysis/gpu_state.py, tasks/nvml_util.GpuStateReader):
clocks, power, temperature and clock event reasons read at the end of each stretch of the
steady loop; a stretch the GPU slowed itself in is left out of the loop's step time.

NVML exists only on a GPU machine: the reader is given a stand-in for pynvml that answers
with NVML's answers recorded on the H100 (tests/fixtures/h100/gpu_state.json, written by
bench/gpu_state_capture.py) where they exist, and the steady loop runs for real on the CPU
with a reading callable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeper.analysis import gpu_state as gs
from tasks import nvml_util
from tasks.timing import steady_loop

FIXTURE = Path(__file__).parent / "fixtures" / "h100" / "gpu_state.json"


class Replayed:
    """pynvml answering from a list of recorded calls, in order, by method name."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    def __init__(self, calls: list):
        self.calls = list(calls)
        self.inits = self.shutdowns = 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlShutdown(self):
        self.shutdowns += 1

    def __getattr__(self, name):
        if not name.startswith("nvmlDevice"):
            raise AttributeError(name)

        def call(handle, *args):
            for i, (n, _, value) in enumerate(self.calls):
                if n == name:
                    del self.calls[i]
                    return value
            raise RuntimeError(f"no recorded answer left for {name}")
        return call


def _recorded() -> list:
    if FIXTURE.exists():
        return json.loads(FIXTURE.read_text())["nvml_calls"]
    pytest.skip("tests/fixtures/h100/gpu_state.json not captured (bench/gpu_state_capture.py on a GPU)")


def test_reason_names_and_what_slows():
    assert gs.reason_names(0x0) == []
    assert gs.reason_names(0x1) == ["gpu_idle"]
    assert gs.reason_names(0x44) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert gs.reason_names(0x1000) == ["0x1000"]  # a bit this version does not know, kept
    assert gs.slowed({"reasons": ["sw_power_cap"]}) and gs.slowed({"reasons": ["hw_thermal_slowdown"]})
    assert not gs.slowed({"reasons": ["gpu_idle", "applications_clocks_setting"]})


def test_loop_state_leaves_slowed_stretches_out():
    reads = [{"sm_mhz": 1980, "mem_mhz": 2619, "power_w": 410.0, "temp_c": 52, "reasons": []},
             {"sm_mhz": 1980, "mem_mhz": 2619, "power_w": 690.0, "temp_c": 61, "reasons": []},
             {"sm_mhz": 1755, "mem_mhz": 2619, "power_w": 700.0, "temp_c": 66, "reasons": ["sw_power_cap"]},
             {"sm_mhz": 1980, "mem_mhz": 2619, "power_w": 520.0, "temp_c": 60, "reasons": ["gpu_idle"]}]
    chunks = [1.00, 1.02, 1.13, 0.98]
    got = gs.loop_state(reads, chunks)
    assert got["slowed_rounds"] == [2] and got["clocks_moved"] is True
    assert got["sm_mhz"] == {"median": 1980, "min": 1755, "max": 1980}
    assert got["step_ms_not_slowed"] == pytest.approx((1.00 + 1.02 + 0.98) / 3)
    assert got["reasons"] == ["gpu_idle", "sw_power_cap"]
    words = gs.state_words(got)
    assert "1755-1980: moved" in words and "1 of 4 stretches slowed by the GPU (sw_power_cap)" in words, words
    # none slowed: no second figure; clocks within 5%: not moved
    calm = gs.loop_state([{**r, "reasons": [], "sm_mhz": 1980 - i} for i, r in enumerate(reads)], chunks)
    assert "step_ms_not_slowed" not in calm and calm["clocks_moved"] is False and not calm["slowed_rounds"]
    assert gs.loop_state([], []) == {}


def test_steady_loop_takes_a_reading_a_stretch_outside_its_time():
    import time

    seen = []

    def read():
        time.sleep(0.05)  # a slow reading: it must not count in the loop's time
        seen.append(time.perf_counter())
        return {"sm_mhz": 1000, "reasons": []}

    loop = steady_loop(lambda: time.sleep(0.002), 0.4, "cpu", state=read)
    assert len(loop["gpu_rounds"]) == len(loop["chunk_step_ms"]) == len(seen) >= 6
    # 8 readings of 50 ms each would add 0.4 s to the loop's 0.4 s: its time leaves them out
    assert loop["loop_s"] < 0.6, loop
    assert 2.0 <= loop["step_ms"] < 4.0, loop
    assert "gpu_rounds" not in steady_loop(lambda: None, 0.05, "cpu")


def test_reader_on_recorded_answers():
    calls = _recorded()
    nvml = Replayed(calls)
    reader = nvml_util.GpuStateReader(nvml=nvml, handle_of=lambda n, d: "gpu0")
    with reader as read:
        readings = [read() for _ in range(sum(1 for c in calls if c[0] == "nvmlDeviceGetPowerUsage"))]
    assert nvml.inits == nvml.shutdowns == 1 and reader.reason is None
    first = readings[0]
    recorded_power = next(v for n, _, v in calls if n == "nvmlDeviceGetPowerUsage")
    assert first["power_w"] == pytest.approx(recorded_power / 1000)  # NVML answers mW
    for r in readings:
        assert 200 < r["sm_mhz"] < 2500 and 1000 < r["mem_mhz"] < 4000 and 15 < r["temp_c"] < 95, r
        assert r["reasons"] == gs.reason_names(r["reasons_mask"])
    state = gs.loop_state(readings, [1.0] * len(readings))
    assert state["rounds"] == len(readings) and state["sm_mhz"]["max"] >= state["sm_mhz"]["min"]
    # the recorded H100 under an 8192 bf16 matmul loop sat at its 700-W cap: every stretch power-capped
    # (SM clock 1305-1455 MHz against 1980 idle), so no stretch is left to time without it, and the words say so
    loaded = readings[:12]
    assert all(r["reasons"] == ["sw_power_cap"] for r in loaded) and all(r["power_w"] > 680 for r in loaded)
    capped = gs.loop_state(loaded, [1.59] * len(loaded))
    assert capped["slowed_rounds"] == list(range(12)) and "step_ms_not_slowed" not in capped
    assert "every stretch slowed by the GPU (sw_power_cap): the step time is a slowed GPU's" in gs.state_words(capped)
    assert readings[-1]["reasons"] == [] and readings[-1]["sm_mhz"] == 1980  # idle after the loop


def test_reader_says_why_it_cannot_read():
    class Broken(Replayed):
        def nvmlInit(self):
            raise RuntimeError("NVML Shared Library Not Found")

    reader = nvml_util.GpuStateReader(nvml=Broken([]), handle_of=lambda n, d: "gpu0")
    with reader as read:
        assert read() == {}
    assert "NVML did not start: NVML Shared Library Not Found" == reader.reason
    # a counter the GPU lacks costs only it
    partial = Replayed([["nvmlDeviceGetClockInfo", [1], 1980], ["nvmlDeviceGetClockInfo", [2], 2619],
                        ["nvmlDeviceGetTemperature", [0], 40],
                        ["nvmlDeviceGetCurrentClocksEventReasons", [], 1]])
    with nvml_util.GpuStateReader(nvml=partial, handle_of=lambda n, d: "gpu0") as read:
        got = read()
    assert got["sm_mhz"] == 1980 and got["reasons"] == ["gpu_idle"] and "power_w" not in got
    assert got["missed"] and got["missed"][0].startswith("power_w:"), got


def test_jobs_table_carries_the_state():
    from sweeper.reporting.columns import JOB_COLUMNS
    from sweeper.reporting.tables import gpu_state_columns

    state = gs.loop_state([{"sm_mhz": 1980, "power_w": 400.0, "temp_c": 50, "reasons": []},
                           {"sm_mhz": 1700, "power_w": 700.0, "temp_c": 70, "reasons": ["hw_thermal_slowdown"]}],
                          [1.0, 1.2])
    cols = gpu_state_columns(state)
    assert cols == {"sm_clock_mhz": 1840.0, "sm_clock_min_mhz": 1700, "clocks_moved": True, "slowed_rounds": 1,
                    "gpu_temp_max_c": 70, "gpu_power_w": 550.0}
    assert set(cols) <= set(JOB_COLUMNS)
    assert gpu_state_columns({}) == dict.fromkeys(cols)
