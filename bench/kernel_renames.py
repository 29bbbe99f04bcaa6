"""Two records of the same job: which of its selected Triton kernels (the kernel table)
kept their name and file, and which appear under another name, matched by the name
without its number and by module. Inductor numbers a graph's kernels in the order it
generates them and names a kernel's file by a hash of its source, name included, so a
kernel tuned in one run and renamed in the next has another file, and its stored config
(keyed by that file) is not found.

    python bench/kernel_renames.py OLD_RECORD NEW_RECORD      # result.json, or .json.gz
e.g. the headline's mixnet_l max-autotune job, first run against the second
(bench/results/headline/):
    python bench/kernel_renames.py tests/fixtures/h200/headline/0.result.json.gz <run2>/0/result.json
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from sweeper.record import read_record  # noqa: E402


def kernels(record: dict) -> dict[str, tuple[str, str]]:
    """name -> (module, kernel file name) of the record's kernel table."""
    return {r["name"]: (r.get("module"), Path(r.get("kernel_path") or "").name)
            for r in (record.get("kernel_table") or {}).get("rows") or [] if r.get("name", "").startswith("triton_")}


def split(name: str) -> tuple[str, int | None]:
    m = re.match(r"(.*)_(\d+)$", name)
    return (m.group(1), int(m.group(2))) if m else (name, None)


def main(old_path: str, new_path: str) -> int:
    old, new = kernels(read_record(Path(old_path))), kernels(read_record(Path(new_path)))
    same = sorted(set(old) & set(new), key=lambda n: (new[n][0], split(n)[1] or 0))
    by_base = defaultdict(list)
    for n in set(old) - set(new):
        by_base[(split(n)[0], old[n][0])].append(split(n)[1])
    print(f"| module | same name | of them, same file | only in the new record | of them, renamed (number moved by) |")
    print("|---|---|---|---|---|")
    for module in sorted({m for m, _ in new.values()}):
        mine = [n for n in same if new[n][0] == module]
        only = sorted((n for n in set(new) - set(old) if new[n][0] == module), key=lambda n: split(n)[1] or 0)
        moved = []
        for n in only:
            base, i = split(n)
            cands = by_base.get((base, module))
            if cands and i is not None:
                moved.append(min((c - i for c in cands if c is not None), key=abs))
        first = f"from number {split(only[0])[1]} on" if only else ""
        print(f"| {module} | {len(mine)} | {sum(old[n][1] == new[n][1] for n in mine)} | {len(only)} {first} | "
              f"{len(moved)} ({', '.join(f'{d:+d}' for d in moved) or '–'}) |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
