"""Does the within-noise mark predict which of max-autotune's decisions flip? Two autotune
store exports of the same job run twice (one job a GPU, each into a store of its own): every
decision of the first, marked against the noise of the other ops' timings in both runs
(leave-one-out: an op's own flip never decides its mark), against whether the second run
chose otherwise; at three noise quantiles. Then, with that pair's noise, the decisions of
another store (the headline's, say): how many are within noise, and what the templates
that won beyond noise bought.

    python bench/autotune_decisions.py FIRST.tgz SECOND.tgz [OTHER_STORE.tgz]
e.g. python bench/autotune_decisions.py bench/results/packing/serial_noise/store_a.tgz \\
         bench/results/packing/serial_noise/store_b.tgz tests/fixtures/h200/headline_store.tgz
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    from sweeper.analysis import autotune_decisions as ad
    from sweeper.store import read_export

    docs = [read_export(Path(p))[1] for p in sys.argv[1:]]
    rel = sorted(docs[0].keys() & docs[1].keys())[0]
    first, second = ad.timings(docs[0][rel]), ad.timings(docs[1][rel])
    gaps = ad.relative_gaps([first, second])
    print(f"# Max-autotune's decisions against their noise\n\n`python bench/autotune_decisions.py {' '.join(sys.argv[1:])}`\n")
    print(f"{len(first)} ops tuned in the first run, {len(first.keys() & second.keys())} in both; "
          f"{len(gaps)} choices timed in both, one choice's two timings apart by "
          f"{ad.noise_pct(gaps, 0.5):.1f}% at the median, {ad.noise_pct(gaps, 0.9):.1f}% at the 90th percentile.\n")
    for q in (0.5, 0.75, 0.9):
        rows = ad.flips(first, second, ad.decisions(first, [first, second], q))
        table = {(m, f): sum(1 for r in rows if r["mark"] == m and r["flipped"] == f)
                 for m in (ad.WITHIN, ad.REAL) for f in (True, False)}
        print(f"## Noise at the {q * 100:.0f}th percentile\n")
        print("| mark | flipped in the second run | kept |\n|---|---|---|")
        for m in (ad.WITHIN, ad.REAL):
            print(f"| {m} | {table[(m, True)]} | {table[(m, False)]} |")
        kinds = sum(r["kind_flipped"] for r in rows)
        print(f"\nTemplate against library call: {kinds} of {len(rows)} flipped; "
              f"{sum(r['library_mark'] == ad.WITHIN for r in rows)} within noise.\n")
        if q == 0.9:
            print("| op | winner | winner ms | runner-up margin % | noise % | mark | flipped to | vs library % | mark |")
            print("|---|---|---|---|---|---|---|---|---|")
            for r in sorted(rows, key=lambda r: -r["winner_ms"]):
                print(f"| {r['op']} | {ad.family(r['winner'])} | {r['winner_ms']:.4f} | {r['margin_pct']:.1f} | "
                      f"{r['noise_pct']:.1f} | {r['mark']} | {ad.family(r['winner_after']) if r['flipped'] else 'kept'} | "
                      f"{r['library_margin_pct']:.1f} | {r['library_mark']} |")
            print()
    if len(docs) == 3:
        other = docs[2]
        for key in sorted(other):
            rows = ad.decisions(ad.timings(other[key]), [first, second])
            s = ad.summary(rows)
            print(f"## {sys.argv[3]}: {key}\n\nJudged by the noise of the pair above (the same GPU model and build): "
                  f"{s['decisions']} ops; {s['within_noise']} within noise of their runner-up, {s['beyond_noise']} "
                  f"beyond; templates won {s['templates_won']}, {s['templates_won_beyond_noise']} beyond noise of the "
                  f"library call, gaining {s['gain_beyond_noise_ms']:.3f} of the {s['gain_ms']:.3f} ms the winning "
                  f"templates gain on the library calls (each op once).\n")


if __name__ == "__main__":
    main()
