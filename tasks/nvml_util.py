"""A second instrument for the busy figure: NVML's GPU utilization, read while the compiled
step runs unprofiled in a steady loop.

NVML's utilization is the driver's own counter: the share of each sample period (1/6 s
to 1 s, by GPU) in which one or more kernels ran. It sees the step exactly as it runs, with
no profiler, but only at that coarse grain and only for the whole GPU. The driver keeps a
ring buffer of timestamped samples (nvmlDeviceGetSamples); the job keeps those that lie
wholly inside the loop (window_samples, pure, tested on the CPU).
"""

from __future__ import annotations

import time
from typing import Callable

# A CPU job has no such counter; said in the record instead of a figure.
NO_GPU_REASON = "no NVIDIA GPU: NVML's utilization counter exists only for a GPU job"


def window_samples(samples: list[tuple[int, int]], start_us: int, end_us: int) -> list[tuple[int, int]]:
    """The (timestamp µs, utilization %) samples whose whole period lies in [start_us, end_us].

    A sample's timestamp marks the end of its period, and the period is the distance to the
    previous sample's timestamp: so the first sample in the buffer, whose period is unknown,
    is dropped, and so is any sample whose period began before the loop did."""
    samples = sorted(samples)
    inside = []
    for (prev_ts, _), (ts, value) in zip(samples, samples[1:]):
        if prev_ts >= start_us and ts <= end_us:
            inside.append((ts, value))
    return inside


def gpu_handle(pynvml, torch_device: int = 0):
    """The NVML handle of the GPU that torch calls `torch_device`. NVML numbers every GPU of
    the machine, whatever CUDA_VISIBLE_DEVICES (set per job by Ray) hides, so the GPU is
    found by its UUID."""
    import torch

    uuid = str(torch.cuda.get_device_properties(torch_device).uuid)
    return pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")


def _read_samples(pynvml, handle, since_us: int) -> list[tuple[int, int]]:
    try:
        _, samples = pynvml.nvmlDeviceGetSamples(handle, pynvml.NVML_GPU_UTILIZATION_SAMPLES, since_us)
    except pynvml.NVMLError_NotFound:  # no sample since `since_us`
        return []
    return [(int(s.timeStamp), int(s.sampleValue.uiVal)) for s in samples]


def utilization_during(run_loop: Callable[[], dict]) -> tuple[dict, dict]:
    """Run `run_loop()` (timing.steady_loop over the step: it returns its start_us and
    end_us) and read NVML's utilization samples of that time. Returns the loop's figures
    and the record's timings.nvml: util_pct (mean of the samples wholly inside the loop),
    samples, values and the period between them; or util_pct None with the reason."""
    try:
        import pynvml
    except ImportError:
        return run_loop(), {"util_pct": None, "reason": "nvidia-ml-py is not installed (pip install nvidia-ml-py)"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return run_loop(), {"util_pct": None, "reason": f"NVML did not start: {e}"}
    try:
        handle = gpu_handle(pynvml)
        loop = run_loop()
        time.sleep(1.1)  # the sample whose period ends after the loop is written within 1 s
        inside = window_samples(_read_samples(pynvml, handle, loop["start_us"] - 2_000_000),
                                loop["start_us"], loop["end_us"])
    except pynvml.NVMLError as e:
        return loop, {"util_pct": None, "reason": f"NVML could not read utilization samples: {e}"}
    finally:
        pynvml.nvmlShutdown()
    out = {"samples": len(inside), "values": [v for _, v in inside],
           "method": "nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES)"}
    if not inside:
        return loop, {**out, "util_pct": None,
                      "reason": "no NVML sample lay wholly inside the loop: lengthen measure.steady_loop_s"}
    periods = [b - a for (a, _), (b, _) in zip(inside, inside[1:])]
    out["period_ms"] = round(sorted(periods)[len(periods) // 2] / 1000, 1) if periods else None
    return loop, {**out, "util_pct": sum(v for _, v in inside) / len(inside)}


def gpu_busy_pct(seconds: float = 0.5) -> float | None:
    """How busy the GPU was over the last `seconds` by NVML's utilization samples (any
    process's kernels: a job holding the GPU's lease and idle reads the others'), or None
    where NVML cannot say."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        handle = gpu_handle(pynvml)
        start = int(time.time() * 1e6)
        time.sleep(seconds)
        samples = _read_samples(pynvml, handle, start - 1_000_000)
        if not samples:
            return float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        return float(sum(v for _, v in samples) / len(samples))
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()


class GpuStateReader:
    """Reads the GPU's state (SM and memory clocks, power, temperature, clock event
    reasons) through NVML, once a timed stretch: `with GpuStateReader() as read: read()`.
    Where NVML cannot start, read() returns {} and `reason` says why; a reading that fails
    half-way keeps what it read and says what it missed."""

    def __init__(self, torch_device: int = 0, nvml=None, handle_of: Callable = gpu_handle):
        self.torch_device = torch_device
        self.nvml = nvml  # a stand-in for pynvml (the tests' recorded readings); None: the real one
        self.handle_of = handle_of
        self.handle = None
        self.reason: str | None = None

    def __enter__(self):
        nvml = self.nvml
        if nvml is None:
            try:
                import pynvml as nvml
            except ImportError:
                self.reason = "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
                return self.read
        try:
            nvml.nvmlInit()
            self.nvml = nvml
            self.handle = self.handle_of(nvml, self.torch_device)
        except Exception as e:  # noqa: BLE001 - NVMLError, or no CUDA device to name
            self.reason = f"NVML did not start: {e}"
            self.handle = None
        return self.read

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            try:
                self.nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down is best effort
                pass

    def read(self) -> dict:
        """One reading: sm_mhz, mem_mhz, power_w, temp_c, reasons (names), reasons_mask,
        t (wall clock, s)."""
        from sweeper.analysis.gpu_state import reason_names

        if self.handle is None:
            return {}
        n, h = self.nvml, self.handle
        out: dict = {"t": round(time.time(), 3)}
        reads = {
            "sm_mhz": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
            "mem_mhz": lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),
            "power_w": lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            "temp_c": lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),
            "reasons_mask": lambda: _event_reasons(n, h),
        }
        for name, fn in reads.items():
            try:
                out[name] = fn()
            except Exception as e:  # noqa: BLE001 - one counter a GPU lacks costs only it
                out.setdefault("missed", []).append(f"{name}: {e}")
        if "reasons_mask" in out:
            out["reasons"] = reason_names(int(out["reasons_mask"]))
        return out


def _event_reasons(nvml, handle) -> int:
    # renamed "clocks event reasons" in NVML 12.2; older drivers know only the throttle name
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(fn(handle))
