"""Which jobs of a sweep to set side by side (pure: the jobs table in, pairs out): those
that differ in one key only (CUDA graphs, max-autotune, AMP, batch size), and the model
pair, the smallest-batch densenet121 job against a mixnet_l job, where the sweep has both
(a launch-bound small-batch model against a GPU-bound one). The report's pairwise figure and its findings use the same pairs.

Pairs are of configurations, not jobs: repeats of one configuration (`seed=0,1`: the same
job key) are one side of a pair, its first job standing for it where one job must (a figure),
all of them where a verdict is said (twins(): their median and spread,
sweeper/analysis/repeats.py). Pairing each repeat with each repeat of the other side said one
verdict per combination, and they disagreed (an H100 sweep of resnet50 run twice with and
without max-autotune: "turn on the kernel configs" and "leave it off" on one page)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sweeper.analysis.repeats import merged
from sweeper.reporting.tables import key_fields

# the keys a pair may differ in, as the report names them; amp_dtype follows amp
PAIR_KEYS = ("cudagraphs", "autotune", "amp", "batch_size")
MODEL_PAIR = ("densenet121", "mixnet_l")  # small-batch densenet121 against mixnet_l


@dataclass(frozen=True)
class Pair:
    key: str  # the key they differ in, or "model" for the model pair
    a: pd.Series  # the job with the key off (or the smaller value; densenet121): its configuration's first
    b: pd.Series
    a_all: tuple = ()  # every finished repeat of a's configuration, in job order (a first); () for a alone
    b_all: tuple = ()

    @property
    def a_rows(self) -> tuple:
        """a's configuration's repeats, a first (a alone where none were given)."""
        return self.a_all or (self.a,)

    @property
    def b_rows(self) -> tuple:
        return self.b_all or (self.b,)

    @property
    def a_jobs(self) -> list[int]:
        return [int(r["job"]) for r in self.a_rows]

    @property
    def b_jobs(self) -> list[int]:
        return [int(r["job"]) for r in self.b_rows]

    @property
    def repeated(self) -> bool:
        return len(self.a_rows) > 1 or len(self.b_rows) > 1

    def twins(self) -> tuple[pd.Series, pd.Series]:
        """Both sides as one row each: the repeats' medians and spreads (repeats.merged);
        a side of one job as it is."""
        return (pd.Series(merged([r.to_dict() for r in self.a_rows])),
                pd.Series(merged([r.to_dict() for r in self.b_rows])))

    def name(self, row: pd.Series) -> str:
        """The job's label with the differing key first: "cudagraphs=on · densenet121 b16 ..."."""
        return f"{self.key}={_value(row, self.key)} · {row['label']}"

    @property
    def caption(self) -> str:
        what = "model pair" if self.key == "model" else f"{self.key} only"
        return f"{self.a['label']} against {self.b['label']} ({what})"


def _value(row: pd.Series, key: str) -> str:
    v = row[key] if key in row else None
    if isinstance(v, (bool,)) or (key in ("cudagraphs", "autotune", "amp") and v in (0, 1)):
        return "on" if bool(v) else "off"
    return str(v)


def one_key_pairs(jobs: pd.DataFrame) -> list[Pair]:
    """Pairs of finished configurations that differ in one of PAIR_KEYS only, in the order
    of their first job numbers. Found by grouping the configurations on every other field,
    key by key: a 1,000-job sweep has half a million pairs of jobs to look at otherwise."""
    ok = jobs[jobs["status"] == "ok"].sort_values("job")
    repeats: dict[str, list[pd.Series]] = {}
    for _, r in ok.iterrows():
        repeats.setdefault(str(r["key"]), []).append(r)
    rows = [(members[0], key_fields(key)) for key, members in repeats.items()]
    found = []
    for key in PAIR_KEYS:
        apart = {key, "amp_dtype"} if key == "amp" else {key}  # amp_dtype follows amp
        groups: dict[frozenset, list[int]] = {}
        for i, (_, fields) in enumerate(rows):
            groups.setdefault(frozenset((k, v) for k, v in fields.items() if k not in apart), []).append(i)
        for members in groups.values():
            for n, i in enumerate(members):
                for j in members[n + 1:]:
                    if rows[i][1].get(key) != rows[j][1].get(key):
                        found.append((i, j, key))
    pairs = []
    for i, j, key in sorted(found):
        ra, rb = rows[i][0], rows[j][0]
        a, b = (ra, rb) if _order(ra, key) <= _order(rb, key) else (rb, ra)
        pairs.append(Pair(key, a, b, tuple(repeats[str(a["key"])]), tuple(repeats[str(b["key"])])))
    return pairs


def _order(row: pd.Series, key: str):
    v = row[key]
    return float(v) if key == "batch_size" else bool(v)


def model_pair(jobs: pd.DataFrame) -> Pair | None:
    """The smallest-batch finished densenet121 job against the finished mixnet_l job of the
    same mode and variant (else any mixnet_l job), None when the sweep lacks either."""
    ok = jobs[jobs["status"] == "ok"]
    dense = ok[ok["model"] == MODEL_PAIR[0]].sort_values(["batch_size", "job"])
    mix = ok[ok["model"] == MODEL_PAIR[1]]
    if dense.empty or mix.empty:
        return None
    d = dense.iloc[0]
    same = mix[(mix["mode"] == d["mode"]) & (mix["cudagraphs"] == d["cudagraphs"]) & (mix["autotune"] == d["autotune"])]
    m = (same if len(same) else mix).sort_values("job").iloc[0]
    return Pair("model", d, m)


def all_pairs(jobs: pd.DataFrame) -> list[Pair]:
    pairs = one_key_pairs(jobs)
    model = model_pair(jobs)
    return pairs + ([model] if model is not None else [])
