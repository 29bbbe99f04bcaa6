"""timm models: existence checks and the curated default batch sizes."""

from __future__ import annotations

import difflib
import importlib.metadata
import os
from functools import lru_cache
from pathlib import Path

from sweeper.record import atomic_write_text

# Default CUDA batch sizes for models people sweep often. mixnet_l 128 and densenet121 16
# are the seed's and the reference's (shared/reference/h200-manual-workflow.md); the rest
# follow PyTorch's benchmarks/dynamo/timm_models_list.txt, capped so that a training step
# fits comfortably in an 80 GB GPU.
CUDA_BATCH_SIZES: dict[str, int] = {
    "mixnet_l": 128,
    "densenet121": 16,
    "resnet18": 32,
    "resnet50": 128,
    "mobilenetv3_large_100": 256,
    "efficientnet_b0": 128,
    "convnext_base": 64,
    "vit_base_patch16_224": 64,
    "swin_base_patch4_window7_224": 64,
    "regnety_040": 64,
}
CUDA_DEFAULT_BATCH = 32
# On a CPU the point is a quick, real run of the whole chain (CI and laptops), not speed.
CPU_DEFAULT_BATCH = 2


class UnknownModelError(ValueError):
    pass


def _names_file() -> Path | None:
    """Where the installed timm's model names are kept between runs: importing timm (and
    with it torch and torchvision) costs the driver 4 s of a 6 s dry run on a 2-core CPU,
    and the check runs before every sweep. Keyed by timm's version, read without importing it."""
    try:
        version = importlib.metadata.version("timm")
    except importlib.metadata.PackageNotFoundError:
        return None
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "sweeper" / f"timm-{version}-models.txt"


@lru_cache(maxsize=1)
def all_model_names() -> tuple[str, ...]:
    cached = _names_file()
    try:
        names = tuple(cached.read_text().split()) if cached else ()
    except OSError:
        names = ()
    if names:
        return names
    import timm

    names = tuple(timm.list_models())
    if cached:
        try:  # best effort: an unwritable cache folder only costs the import next time
            atomic_write_text(cached, "\n".join(names) + "\n")
        except OSError:
            pass
    return names


def check_model_name(name: str) -> None:
    """Raise UnknownModelError naming the closest timm models when `name` is not one."""
    names = all_model_names()
    if name in names:
        return
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
    hint = f" Closest timm names: {', '.join(close)}." if close else ""
    raise UnknownModelError(
        f"unknown model {name!r}: timm has no model of that name.{hint} "
        "List them with: python -c \"import timm; print(timm.list_models('*pattern*'))\""
    )


def default_batch_size(model: str, device: str) -> int:
    if device == "cpu":
        return CPU_DEFAULT_BATCH
    return CUDA_BATCH_SIZES.get(model, CUDA_DEFAULT_BATCH)
