import json

from hydra_plugins.sweeper_ray._results import pack, unpack
from sweeper.record import relocate
from sweeper.sweep import summary as sm


def rec(status="ok", reason=None, step_ms=12.0):
    return {"status": status, "reason": reason, "phase": "done",
            "timings": {"compile_s": 3.0, "compiled_step_ms": {"median": step_ms}, "speedup": 1.5},
            "step": {"busy_pct": 40.0, "busy_pct_reference_style": 55.0}}


def test_headline_takes_the_figures_a_reader_wants():
    h = sm.headline(rec())
    assert h["compiled_step_ms"] == 12.0 and h["busy_pct"] == 40.0 and h["speedup"] == 1.5
    assert sm.headline({"status": "failed"})["compiled_step_ms"] is None


def test_summary_and_closing_report(tmp_path):
    jobs = [sm.job_entry(0, ["model=a"], tmp_path / "0", rec()),
            sm.job_entry(1, ["model=b"], tmp_path / "1", rec("failed", "timed out after 5 s"))]
    path = sm.write_summary(tmp_path, jobs, started=0.0, command=["model=a,b"], done=True)
    data = json.loads(path.read_text())
    assert data["counts"] == {"ok": 1, "failed": 1, "skipped": 0, "cancelled": 0, "accuracy_failed": 0, "storage_missed": 0}
    text, failed = sm.closing_report(jobs, tmp_path, ["model=a,b", f"hydra.sweep.dir={tmp_path}"])
    assert failed
    assert "failed    #1 model=b: timed out after 5 s" in text
    assert str(tmp_path / "1" / "job.log") in text
    assert f"python -m sweeper model=a,b hydra.sweep.dir={tmp_path}" in text
    assert "python -m sweeper model=b" in text
    ok_text, ok_failed = sm.closing_report(jobs[:1], tmp_path, [])
    assert not ok_failed and "did not finish" not in ok_text


def test_bundle_round_trip_leaves_cache_behind_and_relocates_paths(tmp_path):
    scratch = tmp_path / "scratch" / "0"
    (scratch / "traces").mkdir(parents=True)
    (scratch / "cache" / "inductor").mkdir(parents=True)
    (scratch / "traces" / "step.json.gz").write_bytes(b"x")
    (scratch / "cache" / "inductor" / "k.py").write_text("kernel")
    (scratch / "result.json").write_text("{}")
    final = tmp_path / "sweep" / "0"
    unpack(pack(scratch), final)
    assert (final / "traces" / "step.json.gz").read_bytes() == b"x"
    assert not (final / "cache").exists()
    record = {"job": {"dir": str(scratch)},
              "artifacts": {"traces": {"step": f"{scratch}/traces/step.json.gz"}},
              "modules": [{"source_path": f"{scratch}/cache/inductor/m.py", "trace": f"{scratch}/traces/f.json.gz"}]}
    moved = relocate(record, str(scratch), str(final))
    assert moved["job"]["dir"] == str(final)
    assert moved["artifacts"]["traces"]["step"] == f"{final}/traces/step.json.gz"
    assert moved["modules"][0]["trace"] == f"{final}/traces/f.json.gz"
    assert moved["modules"][0]["source_path"] == f"{scratch}/cache/inductor/m.py"  # still on the node


def test_progress_is_a_live_line_on_a_terminal_and_plain_lines_otherwise(capsys):
    import io

    from rich.console import Console

    from sweeper.sweep.progress import Progress

    screen = io.StringIO()
    live = Progress(total=3, reused=1, console=Console(file=screen, force_terminal=True, width=150))
    live.start()
    live.show(running=2, slots=2)
    live.finished("failed", 30.0)
    live.show(running=1, slots=2)
    live.stop()
    drawn = screen.getvalue()
    assert "\x1b[" in drawn  # redrawn in place with terminal control codes
    assert "2/3 done (1 from an earlier run), 1 running, 1 failed" in drawn
    assert "about 0 min left" in drawn or "about 1 min left" in drawn
    assert capsys.readouterr().out == ""  # nothing printed as plain lines

    plain = Progress(total=2, reused=0)  # pytest's stdout is not a terminal
    plain.start()
    plain.show(running=2, slots=2)
    plain.show(running=2, slots=2)  # unchanged: not printed again
    plain.finished("ok", 5.0)
    plain.show(running=1, slots=2)
    plain.stop()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("[sweep] 0/2 done") and "1/2 done" in lines[1]
