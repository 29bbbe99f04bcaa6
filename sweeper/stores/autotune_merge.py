"""Autotune store documents merged (sweeper/stores/autotune_store.py says what they hold): a
job's timings into the store's, a choice timed again keeping its earlier timings as repeats
(the noise max-autotune's decisions are judged against), and kernel configs by their file."""

from __future__ import annotations

REPEATS_KEPT = 4  # earlier timings kept a choice (`repeats`): enough for a noise estimate, a few KB


def merge_entries(into: dict, new: dict, repeats: dict | None = None) -> int:
    """Add `new`'s timed choices to `into` (in place); returns how many were not there.
    A choice timed in both keeps `new`'s timing: the later measurement; with `repeats`
    (the store's), the earlier timing is kept there, op -> inputs -> precision -> choice ->
    [ms, ...] (the last REPEATS_KEPT), for the noise of max-autotune's decisions
    (sweeper/analysis/autotune_decisions.py)."""
    added = 0
    for op, by_inputs in new.items():
        for inputs, by_precision in by_inputs.items():
            for precision, choices in by_precision.items():
                dst = into.setdefault(op, {}).setdefault(inputs, {}).setdefault(precision, {})
                added += sum(1 for c in choices if c not in dst)
                if repeats is not None:
                    for c, ms in choices.items():
                        if c in dst and dst[c] != ms:
                            kept = repeats.setdefault(op, {}).setdefault(inputs, {}).setdefault(precision, {})
                            kept[c] = (kept.get(c, []) + [dst[c]])[-REPEATS_KEPT:]
                dst.update(choices)
    return added


def merge_repeats(into: dict, new: dict) -> None:
    """Another document's `repeats` added to `into`'s (an import of another store's export)."""
    for op, by_inputs in new.items():
        for inputs, by_precision in by_inputs.items():
            for precision, choices in by_precision.items():
                kept = into.setdefault(op, {}).setdefault(inputs, {}).setdefault(precision, {})
                for c, times in choices.items():
                    kept[c] = (kept.get(c, []) + list(times))[-REPEATS_KEPT:]


def merge_doc(into: dict, new: dict) -> tuple[int, int]:
    """A system's document (`cache` timings, `kernel_configs`) merged into another in place:
    (new timed choices, new kernel configs). A choice timed in both keeps `new`'s timing
    and the earlier one in `repeats`; a kernel config in both keeps `new`'s, the later
    tuning (a kernel's path already names its source)."""
    repeats = into.get("repeats") or {}
    if new.get("repeats"):
        merge_repeats(repeats, new["repeats"])
    added = merge_entries(into.setdefault("cache", {}), new.get("cache") or {}, repeats)
    if repeats:
        into["repeats"] = repeats
    configs = into.setdefault("kernel_configs", {})
    new_configs = sum(1 for k in (new.get("kernel_configs") or {}) if k not in configs)
    configs.update(new.get("kernel_configs") or {})
    if new.get("kernel_code"):  # each config's kernel code key, for renamed kernels (older stores lack it)
        into.setdefault("kernel_code", {}).update(new["kernel_code"])
    if new.get("system") and not into.get("system"):
        into["system"] = new["system"]
    return added, new_configs
