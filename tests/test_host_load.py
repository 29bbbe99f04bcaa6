"""tasks/host_load.py: the rest of the host's busy cores per phase, and the report's note."""

import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from sweeper.reporting.notes import busy_host_notes
from sweeper.sweep.summary import busy_while_measuring
from tasks.host_load import HostLoad, busy_ticks, other_busy_cores, parse_pid_stat, tree_ticks

linux_only = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="reads /proc")


def test_busy_ticks_leave_out_idle_and_iowait():
    stat = "cpu  100 5 50 1000 20 1 2 3 0 0\ncpu0 50 2 25 500 10 0 1 1 0 0\n"
    assert busy_ticks(stat) == 100 + 5 + 50 + 1 + 2 + 3
    assert busy_ticks("intr 1 2 3\n") is None


def test_pid_stat_with_spaces_in_the_command_name():
    line = "4242 (python3 -m sweep) S 4200 4242 4200 0 -1 4194304 100 0 0 0 1500 250 0 0 20 0 9 0"
    assert parse_pid_stat(line) == (4200, 1750)


def test_tree_ticks_sum_a_process_and_its_descendants_only():
    stats = {10: (1, 100), 11: (10, 20), 12: (11, 3), 13: (1, 999)}
    assert tree_ticks(stats, 10) == 123
    assert tree_ticks(stats, 11) == 23
    assert tree_ticks(stats, 99) == 0


def test_other_busy_cores():
    # 300 ticks of the host at 100 a second, 100 of them the job's, over 2 s: one other core
    assert other_busy_cores(300, 100, 2.0, 100.0) == pytest.approx(1.0)
    assert other_busy_cores(100, 120, 1.0, 100.0) == 0.0  # rounding never goes negative
    assert other_busy_cores(100, 0, 0.0, 100.0) is None


@linux_only
@pytest.mark.alone  # needs an idle core: run with nothing beside it (make test)
def test_a_busy_process_outside_the_job_counts_and_the_jobs_own_work_does_not():
    host = HostLoad()
    # what the rest of the machine does anyway (a second test run, CI's own services): the
    # figures below are compared with it, not with zero
    host.enter("background")
    time.sleep(1.0)
    host.enter("own")
    if host.report()["background"] > (os.cpu_count() or 1) - 1.5:
        pytest.skip("the host has no idle core to measure with (another test run?)")
    end = time.monotonic() + 1.0
    x = 0
    while time.monotonic() < end:  # the job's own process, busy
        x += 1
    host.enter("other")
    # a busy process that is not ours: started through a shell that exits at once, so
    # that it is re-parented away from this process tree
    subprocess.run(["sh", "-c", f"{sys.executable} -c 'import time\nend=time.time()+1.5\nwhile time.time()<end: pass' &"],
                   check=True)
    time.sleep(1.2)
    host.enter("end")
    rep = host.report()
    assert rep["own"] < rep["background"] + 0.5  # one core of our own work is not "other"
    assert rep["other"] > rep["background"] + 0.5


def test_busy_while_measuring_and_the_report_note():
    timings = {"host_busy_cores": {"compile": 20.0, "timing": 0.1, "time_modules": 2.5}}
    assert busy_while_measuring(timings) == 2.5  # compile is not a measuring phase
    assert busy_while_measuring({}) is None
    jobs = pd.DataFrame({"job": [0, 1, 2], "host_busy_cores": [0.2, 2.5, None]})
    notes = busy_host_notes(jobs)
    assert len(notes) == 1 and "#1 (2.5 cores)" in notes[0] and "#0" not in notes[0]
    assert busy_host_notes(jobs.assign(host_busy_cores=[0.1, 0.2, None])) == []


def test_a_long_module_timing_says_how_many_rounds_are_taken_and_what_is_left():
    """The demo on a loaded host sat minutes in time_modules saying only "still in phase
    time_modules: N s": the heartbeat now says the rounds taken and what is left."""
    from tasks.phases_compile import heartbeat_line
    from tasks.timing import rounds_in_turn

    now = [0.0]
    said = []

    def one_round():
        now[0] += 1.0
        said.append(heartbeat_line("time_modules", now[0]))
        return now[0]

    rounds_in_turn({"forward_0": one_round, "backward_1": one_round}, 3, 10, 4.0, clock=lambda: now[0])
    assert "rounds taken 0, 0 (forward_0, backward_1), each to take at least 3 and 4 s in all (at most 10)" in said[0]
    assert "rounds taken 2, 1" in said[3]
    assert heartbeat_line("time_modules", 99.0) == "still in phase time_modules: 99 s"  # done: no stale rounds
