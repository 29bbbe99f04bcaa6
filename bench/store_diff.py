"""Which kernel configs a later autotune-store export holds anew, and which of an earlier
export's it rewrote: a seeded kernel tuned again (its `.best_config` written anew) shows
as rewritten, and as "another config" when tuning chose differently the second time.
Then the template choices both exports timed (max-autotune's mm and convolution choices):
for how many the fastest choice differs, and how far the same choice's timings differ.

    python bench/store_diff.py EARLIER.tgz LATER.tgz
e.g. the headline's first two sittings (bench/results/headline/README.md):
    python bench/store_diff.py bench/results/headline/sitting1_store.tgz bench/results/headline/sitting2_store.tgz
"""

from __future__ import annotations

import json
import sys
import tarfile


def kernel_configs(path: str) -> dict[str, str]:
    """Every key's kernel configs in a `python -m sweeper.store export` tarball, by
    (key file, kernel file) -> the `.best_config` text."""
    out = {}
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".json") and "/" in member.name.strip("./"):
                doc = json.load(tar.extractfile(member))
                out.update({(member.name, k): v for k, v in doc.get("kernel_configs", {}).items()})
    return out


def choice_timings(path: str) -> dict[tuple, dict[str, float]]:
    """Every (key file, op, input key, precision) -> {choice: ms} that max-autotune timed, in an
    export (each key's `cache`: Inductor's autotune timings file)."""
    out = {}
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith(".json") and "/" in member.name.strip("./"):
                for op, inputs in (json.load(tar.extractfile(member)).get("cache") or {}).items():
                    for key, by_precision in inputs.items():
                        for precision, timings in by_precision.items():
                            out[(member.name, op, key, precision)] = timings
    return out


def config_only(text: str) -> dict:
    """A `.best_config` file's config alone, not its tuning time or hashes."""
    return {k: v for k, v in json.loads(text).items() if k not in ("time_taken_ms", "triton_cache_hash")}


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    earlier, later = kernel_configs(sys.argv[1]), kernel_configs(sys.argv[2])
    kept = [k for k in earlier if k in later]
    rewritten = [k for k in kept if later[k] != earlier[k]]
    other = [k for k in rewritten if config_only(later[k]) != config_only(earlier[k])]
    new = [k for k in later if k not in earlier]
    seconds = lambda keys, side: sum(json.loads(side[k]).get("time_taken_ms") or 0 for k in keys) / 1000
    print("| kernel configs | count | tuning s recorded |\n|---|---|---|")
    print(f"| in the earlier export | {len(earlier)} | {seconds(earlier, earlier):.1f} |")
    print(f"| in the later export | {len(later)} | {seconds(later, later):.1f} |")
    print(f"| new in the later | {len(new)} | {seconds(new, later):.1f} |")
    print(f"| of the earlier, untouched | {len(kept) - len(rewritten)} | |")
    print(f"| of the earlier, rewritten (tuned again) | {len(rewritten)} | {seconds(rewritten, later):.1f} |")
    print(f"| of those, another config chosen | {len(other)} | |")
    print(f"| of the earlier, gone from the later | {len(earlier) - len(kept)} | |")
    a, b = choice_timings(sys.argv[1]), choice_timings(sys.argv[2])
    both = [k for k in a if k in b and a[k] and b[k]]
    other = [k for k in both if min(a[k], key=a[k].get) != min(b[k], key=b[k].get)]
    ratios = sorted(abs(b[k][c] / a[k][c] - 1) * 100 for k in both for c in a[k] if c in b[k] and a[k][c] > 0)
    print("\n| template choices | count |\n|---|---|")
    print(f"| inputs timed in both | {len(both)} |")
    print(f"| of those, another fastest choice | {len(other)} |")
    if ratios:
        print(f"| one choice's two timings differ, median / max % | {ratios[len(ratios) // 2]:.1f} / {ratios[-1]:.1f} |")


if __name__ == "__main__":
    main()
