"""A stopped ``specsim conform`` ends its workers: SIGTERM (a CI time limit, ``timeout``, a cancelled job)
stops the running group's process group, records the group as interrupted, exits 143, and ``--resume``
finishes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_isolation import DRIVER

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` from the state on (state, ppid, pgrp, ...), or None for no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def _processes() -> dict[int, list[str]]:
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None and fields[0] != "Z":
                out[int(name)] = fields
    return out


def _group_leaders(pid: int) -> list[int]:
    """``pid``'s children that lead a process group of their own: a group's process (its session's leader).
    The run may have other children beside it for a moment, which are not the group's."""
    return [p for p, fields in _processes().items() if int(fields[1]) == pid and int(fields[2]) == p]


def _group(pgid: int) -> list[int]:
    return [p for p, fields in _processes().items() if int(fields[2]) == pgid]


def _wait_for(what, timeout: float, proc):
    deadline = time.monotonic() + timeout
    while True:
        got = what()
        if got:
            return got
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate(timeout=10)
        time.sleep(0.05)


def _kill_group_if_left(pgid: int) -> None:
    """A failing run must not leave its sleepers behind for the next test."""
    if _group(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sigterm_ends_the_groups_processes_and_resume_finishes(tmp_path, request):
    here = os.path.dirname(os.path.abspath(__file__))
    pidfile = tmp_path / "helper.pid"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.getcwd()]), SPECSIM_PROGRESS="0",
               FAKEDEV_HELPER_PIDFILE=str(pidfile))
    env.pop("FAKEDEV_NO_HANG", None)
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", DRIVER, "conform", "--device", "specsim_fakedev:make_hanging_with_helper", "--quick",
           "--groups", "F3-hang,F5-ok", "--out", str(out), "--no-report", "--exit-zero-on", "quick,partial"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        worker = _wait_for(lambda: _group_leaders(proc.pid), 30, proc)[0]     # the group's process
        request.addfinalizer(lambda: _kill_group_if_left(worker))
        helper = int(_wait_for(lambda: pidfile.exists() and pidfile.read_text(), 30, proc))  # verify is hanging
        assert _stat(helper)[2] == str(worker), "the helper runs in the group's process group"
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, (stdout, stderr)
    assert "stopped by SIGTERM" in stderr and "--resume" in stderr
    deadline = time.monotonic() + 5  # an orphan is reaped by init: allow it a moment
    while (_alive(worker) or _alive(helper) or _group(worker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(worker) and not _alive(helper) and not _group(worker), \
        f"left running: {[p for p in (worker, helper) if _alive(p)]} group {_group(worker)}"

    doc = json.loads((out / "conformance.json").read_text())
    run = doc["run"]
    assert run["complete"] is False and run["pending_groups"] == ["F3-hang", "F5-ok"]
    assert run["interrupted"]["group"] == "F3-hang" and run["interrupted"]["signal"] == "SIGTERM"
    assert run["group_outcomes"]["F3-hang"]["outcome"] == "interrupted"
    assert doc["verdict"]["status"] == "incomplete" and doc["passed"] is False
    from reports import render_directory
    notes = render_directory([str(out)], str(tmp_path / "report"), with_plots=False)["notes"]
    assert any("INCOMPLETE (stopped by SIGTERM in F3-hang; pending groups: F3-hang, F5-ok)" in n for n in notes), notes

    env["FAKEDEV_NO_HANG"] = "1"  # the driver fixed, the same run continued
    done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((out / "conformance.json").read_text())
    assert doc["run"]["complete"] is True and "interrupted" not in doc["run"]
    assert {c["name"]: c["status"] for c in doc["checks"]} == {"F3-hang/greedy/V17": "pass", "F5-ok/greedy/V11": "pass"}
