"""Progress off a terminal (CI logs, files): a line per finished group and a line at least every 30 s inside one."""

from __future__ import annotations

import io

import pytest

from specsim.conformance.run.progress import Progress, duration, mode


class Clock:
    """A clock the test moves by hand."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def off_terminal(monkeypatch):
    monkeypatch.delenv("SPECSIM_PROGRESS", raising=False)
    return io.StringIO()   # isatty() is False


def run_long_group(progress: Progress, clock: Clock, seconds: int, poll_s: float = 0.2) -> None:
    """Tick as ``run_group_in_subprocess`` does while its child runs."""
    for _ in range(int(seconds / poll_s)):
        clock.now += poll_s
        progress.tick()


def test_off_a_terminal_each_finished_group_gets_a_line(off_terminal):
    clock = Clock()
    progress = Progress(total=14, stream=off_terminal, clock=clock)
    progress.finished = 2
    progress.start("L1-sizes")
    clock.now += 19.2
    progress.done("pass", counts={"pass": 61, "fail": 0})
    assert off_terminal.getvalue() == "[3/14] L1-sizes  pass 61  19 s\n"


def test_a_failing_group_names_its_counts_worst_first_and_without_counts_its_outcome(off_terminal):
    clock = Clock()
    progress = Progress(total=2, stream=off_terminal, clock=clock)
    progress.start("L1-injected")
    clock.now += 75
    progress.done("fail", counts={"pass": 59, "fail": 2, "not_supported": 1})
    progress.start("L2-keyed")
    progress.done("pass")
    assert off_terminal.getvalue().splitlines() == ["[1/2] L1-injected  fail 2 not_supported 1 pass 59  1 min 15 s",
                                                    "[2/2] L2-keyed  pass  0 s"]


def test_a_long_group_writes_a_line_at_least_every_30_seconds_with_its_estimate(off_terminal):
    clock = Clock()
    progress = Progress(total=14, stream=off_terminal, clock=clock, expected={"L3-statistical": 720})
    progress.finished = 12
    progress.start("L3-statistical")
    run_long_group(progress, clock, 95)
    lines = off_terminal.getvalue().splitlines()
    assert lines == ["[13/14] L3-statistical  running 30 s (about 12 min expected)",
                     "[13/14] L3-statistical  running 1 min (about 12 min expected)",
                     "[13/14] L3-statistical  running 1 min 30 s (about 12 min expected)"]


def test_without_an_estimate_the_running_line_says_the_time_so_far_and_a_group_past_its_estimate_says_so(off_terminal):
    clock = Clock()
    progress = Progress(total=1, stream=off_terminal, clock=clock, heartbeat_s=30)
    progress.start("L0-laws")
    run_long_group(progress, clock, 31)
    progress.start("L3-statistical", expected_s=20)
    run_long_group(progress, clock, 31)
    assert off_terminal.getvalue().splitlines() == ["[1/1] L0-laws  running 30 s",
                                                    "[1/1] L3-statistical  running 30 s (past its usual 20 s)"]


def test_a_group_line_restarts_the_silence_and_the_close_gives_the_total(off_terminal):
    clock = Clock()
    progress = Progress(total=2, stream=off_terminal, clock=clock)
    progress.start("A")
    run_long_group(progress, clock, 20)
    progress.done("pass")
    progress.start("B")
    run_long_group(progress, clock, 20)   # 20 s since A's line: nothing yet
    progress.done("fail")
    progress.close()
    assert off_terminal.getvalue().splitlines() == ["[1/2] A  pass  20 s", "[2/2] B  fail  20 s",
                                                    "2 group(s) in 40 s: fail 1, pass 1"]
    assert "\r" not in off_terminal.getvalue()


def test_the_environment_chooses_lines_bar_or_silence(monkeypatch, off_terminal):
    assert mode(off_terminal) == "lines"
    monkeypatch.setenv("SPECSIM_PROGRESS", "0")
    assert mode(off_terminal) == "off"
    progress = Progress(total=1, stream=off_terminal)
    progress.start("A")
    progress.done("pass")
    progress.close()
    assert off_terminal.getvalue() == ""
    monkeypatch.setenv("SPECSIM_PROGRESS", "1")
    assert mode(off_terminal) == "bar"
    monkeypatch.setenv("SPECSIM_PROGRESS", "lines")
    assert mode(off_terminal) == "lines"


def test_durations_read_as_a_person_reads_them():
    assert [duration(s) for s in (0, 59.4, 60, 61, 3599, 3600, 7322)] == [
        "0 s", "59 s", "1 min", "1 min 01 s", "59 min 59 s", "1 h 00 min", "2 h 02 min"]
