"""The autotune store's own command: python -m sweeper.store (or `sweeper store`; sweeper/store.py)

    python -m sweeper.store show                      # per key: GPU, ops, kernel configs, size, last use
    python -m sweeper.store export store.tgz          # a tarball to carry to another machine (a few MB)
    python -m sweeper.store import store.tgz          # merged into this machine's store
    python -m sweeper.store prune --days 30           # drop keys no job has used for 30 days
    python -m sweeper.store decisions                 # max-autotune's decisions against their noise
    python -m sweeper.store decisions --against other.tgz --csv decisions.csv

The store is the folder sweeps name in `autotune_store` (default $SWEEPER_AUTOTUNE_STORE,
else ~/.cache/sweeper/autotune); `--store PATH` names another. A key is one torch version
and one Inductor system hash (GPU model, CUDA and Triton versions): the jobs of that build
on that GPU model use it (sweeper/stores/autotune_store.py).

An export holds every key's template timings and kernel configs, with a manifest (format
version, and a checksum and the counts for each file; sweeper/stores/export.py). Import
checks all of it before it writes anything, then merges under the store's locks, so a sweep
taking entries into the same store at the time loses nothing. A file of another format version, or one that is
damaged, is refused with exit code 2; nothing in the store changes then.

`decisions` lists, per key, each op max-autotune tuned: the winner, the runner-up and their
margin, the best template against the best library call, and whether each margin is beyond
the noise: how far one choice's timings move between runs, read from the store's repeats (a
choice timed again keeps its earlier timings) and from each `--against` export (another run
of the same jobs, say; sweeper/analysis/autotune_decisions.py).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from sweeper.stores import autotune_store as st
from sweeper.stores.export import StoreCommandError, export, import_, keys, printable, read_export


def default_store() -> Path:
    return Path(os.environ.get("SWEEPER_AUTOTUNE_STORE") or "~/.cache/sweeper/autotune").expanduser()


def last_used(path: Path) -> float:
    used = path.with_suffix(".used")
    return used.stat().st_mtime if used.exists() else path.stat().st_mtime


def describe_key(path: Path) -> dict:
    doc = st.read_doc(path)
    gpu = ((doc.get("system") or {}).get("device") or {}).get("name")
    return {"torch": path.parent.name.removeprefix("torch-"), "system": path.stem, "gpu": gpu,
            "ops": st.count_ops(doc.get("cache") or {}), "choices": st.count_entries(doc.get("cache") or {}),
            "kernel_configs": len(doc.get("kernel_configs") or {}), "bytes": path.stat().st_size,
            "last_used": last_used(path)}


def _when(t: float) -> str:
    days = (time.time() - t) / 86400
    stamp = datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M")
    return f"{stamp} ({days:.0f} days ago)" if days >= 1 else f"{stamp} (today)"


def show(store: Path) -> int:
    found = keys(store)
    if not found:
        print(f"{store}: empty (no autotune=on job has given it anything yet)")
        return 0
    print(f"{store}:")
    print(f"{'torch':<18} {'system':<14} {'GPU':<26} {'ops':>5} {'choices':>8} {'kernel configs':>14} {'size':>9}  last use")
    for path in found:
        try:
            k = describe_key(path)
        except st.StoreError as e:
            print(f"  {path}: unreadable ({e}); a sweep sets it aside when it next reads it")
            continue
        print(f"{printable(k['torch']):<18} {printable(k['system'])[:12]:<14} {printable(k['gpu'] or 'no GPU')[:26]:<26} {k['ops']:>5} "
              f"{k['choices']:>8} {k['kernel_configs']:>14} {k['bytes'] / 1e3:>7.0f}kB  {_when(k['last_used'])}")
    return 0


def prune(store: Path, days: float, dry_run: bool) -> int:
    # NaN compares false with everything: "not used since NaN days ago" would drop every key
    if not math.isfinite(days) or days < 0:
        raise StoreCommandError(f"--days {days}: a number of days, 0 or more (e.g. --days 30); nothing was dropped")
    cutoff, dropped = time.time() - days * 86400, 0
    for path in keys(store):
        if last_used(path) >= cutoff:
            continue
        print(f"{'would drop' if dry_run else 'dropped'} {path.parent.name}/{path.stem} (last used {_when(last_used(path))})")
        dropped += 1
        if not dry_run:
            with st.locked(path.parent, path.stem):
                path.unlink()
                path.with_suffix(".used").unlink(missing_ok=True)
    print(f"{dropped} of {len(keys(store)) + (0 if dry_run else dropped)} keys "
          f"{'would be ' if dry_run else ''}dropped (not used for {days:g} days)")
    return 0


def decisions(store: Path, against: list[Path], top: int, csv: Path | None) -> int:
    from sweeper.analysis import autotune_decisions as ad

    found = keys(store)
    if not found:
        raise StoreCommandError(f"{store}: the store is empty, no decisions to show (run an autotune=on sweep first, "
                                "or name another store with --store)")
    others = [read_export(p)[1] for p in against]
    table = []
    for path in found:
        try:
            doc = st.read_doc(path)
        except st.StoreError as e:
            print(f"{path}: unreadable ({e}); a sweep sets it aside when it next reads it")
            continue
        rel = f"{path.parent.name}/{path.name}"
        mine = ad.timings(doc)
        runs = [mine, *ad.repeat_runs(doc), *(ad.timings(o[rel]) for o in others if rel in o)]
        rows = ad.decisions(mine, runs)
        sums = ad.summary(rows)
        gaps = ad.relative_gaps(runs)
        noise = ad.noise_pct(gaps)
        print(f"{printable(rel)} ({printable(((doc.get('system') or {}).get('device') or {}).get('name') or 'no GPU')}): "
              f"{sums['decisions']} ops decided; noise {f'{noise:.1f}%' if noise is not None else 'unknown'} "
              f"({len(gaps)} repeated timings); {sums['within_noise']} within noise, {sums['beyond_noise']} beyond; "
              f"templates won {sums['templates_won']}, {sums['templates_won_beyond_noise']} beyond noise of the "
              f"library call, gaining {sums['gain_beyond_noise_ms']:.3f} of {sums['gain_ms']:.3f} ms")
        if noise is None:
            print("  no choice has been timed twice yet: pass another run's export with --against to judge the margins")
        print(f"  {'op':<12} {'winner':<26} {'ms':>8} {'margin %':>9} {'mark':<14} {'vs library %':>12} {'mark':<14}")
        for r in rows[:top]:
            lib = r["library_margin_pct"]
            print(f"  {printable(r['op']):<12} {printable(r['winner'])[:26]:<26} {r['winner_ms']:>8.4f} "
                  f"{r['margin_pct'] if r['margin_pct'] is not None else float('nan'):>9.1f} {r['mark']:<14} "
                  f"{lib if lib is not None else float('nan'):>12.1f} {r['library_mark']:<14}")
        if len(rows) > top:
            print(f"  ... and {len(rows) - top} more (--top N, or --csv FILE for all)")
        table += [{"key": rel, **r} for r in rows]
    if csv is not None:
        import pandas as pd

        try:
            pd.DataFrame(table).to_csv(csv, index=False)
        except OSError as e:
            raise StoreCommandError(f"--csv {csv}: cannot be written ({e.strerror or e}); name a file in a folder you "
                                    "can write") from None
        print(f"every decision: {csv}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sweeper.store", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    p.add_argument("--store", type=Path, default=None,
                   help="the store folder (default: $SWEEPER_AUTOTUNE_STORE, else ~/.cache/sweeper/autotune)")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("show", help="per key: GPU, ops, timed choices, kernel configs, size, last use")
    e = sub.add_parser("export", help="the whole store into one tarball")
    e.add_argument("file", type=Path)
    i = sub.add_parser("import", help="a tarball from `export` merged into this store")
    i.add_argument("file", type=Path)
    r = sub.add_parser("prune", help="drop keys that no job used for DAYS days")
    r.add_argument("--days", type=float, default=30.0, help="default 30")
    r.add_argument("--dry-run", action="store_true", help="say what would go, drop nothing")
    d = sub.add_parser("decisions", help="max-autotune's decisions, each margin against the noise of its timings")
    d.add_argument("--against", type=Path, action="append", default=[],
                   help="an export of another run (python -m sweeper.store export): its timings of the same ops add to the noise")
    d.add_argument("--top", type=int, default=20, help="decisions listed a key, costliest winner first (default 20)")
    d.add_argument("--csv", type=Path, default=None, help="every decision into this CSV file")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)  # a usage error exits 2 (argparse)
    store = (args.store or default_store()).expanduser()
    try:
        if args.command == "show":
            return show(store)
        if args.command == "export":
            return export(store, args.file)
        if args.command == "import":
            return import_(store, args.file)
        if args.command == "decisions":
            return decisions(store, args.against, args.top, args.csv)
        return prune(store, args.days, args.dry_run)
    except StoreCommandError as e:
        print(f"sweeper store: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    from sweeper.command_line import closing_pipe_quietly

    sys.exit(closing_pipe_quietly(main)())
