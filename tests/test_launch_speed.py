"""The launch probe in the aggregate, on real GPU records: seven resnet18 training jobs
(batch 32, one compile) from one H200 machine (bench/results/launch_speed/probe_resnet18),
committed under tests/fixtures/h200/launch_speed. In job F the host launched at about 7.4 µs
where the others read about 10.2, and its backward ran 2.6 ms a call against about 3.9."""

import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from sweeper.aggregate import aggregate
from sweeper.reporting.notes import LAUNCH_OFF_PCT, launch_speed_notes
from sweeper.record import read_record
from sweeper.sweep.summary import launch_us

FIX = Path(__file__).parent / "fixtures" / "h200" / "launch_speed"
NAMES = "ABCDEFG"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    sweep = tmp_path_factory.mktemp("s6") / "resnet18"
    records = {}
    for n, name in enumerate(NAMES):
        rec = read_record(FIX / f"resnet18_{name}.result.json.gz")
        (sweep / str(n)).mkdir(parents=True)
        (sweep / str(n) / "result.json").write_text(json.dumps(rec))
        records[n] = rec
    return sweep, records, aggregate(sweep)


def test_each_job_s_launch_speed_is_the_median_of_all_its_readings(sweep):
    sweep_dir, records, _ = sweep
    jobs = pd.read_parquet(sweep_dir / "tables" / "jobs.parquet").set_index("job")
    for n, rec in records.items():
        readings = rec["timings"]["launch_us"]["values"] + [v for m in rec["modules"] for v in m["launch_us"]["values"]]
        assert len(readings) == 5 + sum(m["wall_ms"]["n"] for m in rec["modules"])  # one per round
        assert jobs.loc[n, "launch_us"] == pytest.approx(statistics.median(readings), abs=1e-3) == launch_us(rec)
    assert jobs.loc[NAMES.index("F"), "launch_us"] < 8 < 10 < jobs.drop(NAMES.index("F"))["launch_us"].min()


def test_the_report_names_the_job_that_measured_on_a_faster_host(sweep):
    sweep_dir, records, report_path = sweep
    page = report_path.read_text()
    assert "launch µs" in page
    note = next(line for line in page.splitlines() if "launched work at another speed" in line)
    f = NAMES.index("F")
    assert f"#{f} (7.59 µs, faster)" in note
    assert [n for n in records if f"#{n} (" in note] == [f]  # the others read within 7% of the median


def test_no_note_without_two_readings_or_within_the_threshold():
    assert launch_speed_notes(pd.DataFrame({"job": [0, 1], "launch_us": [7.0, None]})) == []
    assert launch_speed_notes(pd.DataFrame({"job": [0], "status": ["ok"]})) == []
    close = 1 + LAUNCH_OFF_PCT / 100 * 0.9
    assert launch_speed_notes(pd.DataFrame({"job": [0, 1, 2], "launch_us": [10.0, 10.0, 10.0 * close]})) == []
    slow = launch_speed_notes(pd.DataFrame({"job": [0, 1, 2], "launch_us": [10.0, 10.0, 12.0]}))
    assert len(slow) == 1 and "#2 (12.00 µs, slower)" in slow[0] and "#0" not in slow[0]
