"""Counts in words, as a person writes them: "1 job", "2 jobs" (never "1 jobs")."""

from __future__ import annotations

_IRREGULAR = {"was": "were"}


def count(n: int | float, word: str, plural: str | None = None) -> str:
    """`n` and `word`, in the plural unless `n` is 1: count(1, "sweep") == "1 sweep"."""
    many = plural or _IRREGULAR.get(word) or (word[:-1] + "ies" if word.endswith("y") and word[-2:-1] not in "aeiou"
                                              else word + "es" if word.endswith(("s", "sh", "ch", "x")) else word + "s")
    return f"{n:g} {word if n == 1 else many}" if isinstance(n, float) else f"{n} {word if n == 1 else many}"
