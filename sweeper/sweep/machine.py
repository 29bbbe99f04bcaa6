"""This machine's GPUs, read by NVML without importing torch (about a second), and what
`device=auto` and an unset `batch_size` become for a job here: the dry run, `--cfg job`
and the launcher's checks answer as the job itself will (tasks/phases.setup)."""

from __future__ import annotations

from sweeper.models import default_batch_size


def nvml_gpus() -> tuple[int | None, str | None]:
    """(GPUs on this machine, the first one's model as records name it), read by NVML
    without importing torch: (None, None) when pynvml is missing, (0, None) with no driver."""
    try:
        import pynvml
    except ImportError:
        return None, None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # no NVIDIA driver: no GPU a job could use
        return 0, None
    try:
        count = pynvml.nvmlDeviceGetCount()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)) if count else None
        return count, (name.decode() if isinstance(name, bytes) else name)
    finally:
        pynvml.nvmlShutdown()


def nvml_memory_gib() -> float | None:
    """The first GPU's memory in GiB, by NVML; None where NVML cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no pynvml, no driver: not known
        return None
    try:
        if not pynvml.nvmlDeviceGetCount():
            return None
        return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).total / 2**30
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()


def nvml_uuid(gpu_id: str) -> str | None:
    """The UUID of the GPU a job was given (its index, or its UUID already), by NVML: the
    GPU's name across processes and sweeps on a node (tasks/gpu_lease.py); None where NVML
    cannot say."""
    if gpu_id.startswith(("GPU-", "MIG-")):
        return gpu_id
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001
        return None
    try:
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(int(gpu_id)))
        return uuid.decode() if isinstance(uuid, bytes) else uuid
    except (pynvml.NVMLError, ValueError):
        return None
    finally:
        pynvml.nvmlShutdown()


def resolved(config: dict, gpus: int | None) -> dict:
    """What a job of `config` runs with on a machine of `gpus` GPUs (None: not known here,
    e.g. on a cluster): its `device`, its `batch_size` and where each came from, and
    `skipped` (why it would be skipped there, else None)."""
    device, why = config.get("device") or "auto", None
    if device == "auto":
        if gpus is None:
            device, why = "auto", "where the job runs: cuda on a node with a GPU, else cpu"
        else:
            device, why = ("cuda", f"{gpus} GPU(s) here") if gpus else ("cpu", "no GPU here")
    batch, batch_why = config.get("batch_size"), None
    if batch is None and device in ("cuda", "cpu"):
        batch = default_batch_size(str(config.get("model")), device)
        batch_why = "the CPU default" if device == "cpu" else f"the default for {config.get('model')} on a GPU"
    skipped = "cudagraphs=on needs a CUDA device" if config.get("cudagraphs") and device == "cpu" else None
    return {"device": device, "device_why": why, "batch_size": batch, "batch_size_why": batch_why, "skipped": skipped}


def job_line(config: dict, gpus: int | None) -> str:
    """One line for the dry run: "device cpu (no GPU here), batch 2 (the CPU default)"."""
    r = resolved(config, gpus)
    out = f"device {r['device']}" + (f" ({r['device_why']})" if r["device_why"] else "")
    out += f", batch {r['batch_size']}" + (f" ({r['batch_size_why']})" if r["batch_size_why"] else "") \
        if r["batch_size"] is not None else ", batch: the model's default where it runs"
    return out + (f"; SKIPPED here: {r['skipped']}" if r["skipped"] else "")
