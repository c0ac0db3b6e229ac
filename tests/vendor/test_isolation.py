"""``specsim conform`` isolation: a crash, hang or exception in one group is that group's ``error``;
every other group keeps its results; the report is still written; ``--resume`` skips finished groups."""

from __future__ import annotations

import json
import os
import types

import pytest

from specsim.commands import conform
from specsim.conformance.run import runner
from specsim_fakegroups import FAKE_GROUPS


@pytest.fixture
def fake_groups(monkeypatch):
    monkeypatch.setattr(runner, "GROUPS", dict(FAKE_GROUPS))
    return FAKE_GROUPS


def conform_args(**kw) -> types.SimpleNamespace:
    base = dict(device="specsim_fakedev:make_good", out=None, seed=0, alpha=1e-3, groups=None, quick=True,
                group_timeout=60.0, resume=False, in_process=False, no_report=True, waivers=None,
                exit_zero_on="quick,partial", table=True)  # these test isolation: a --quick subset exits 0 here
    base.update(kw)
    return types.SimpleNamespace(**base)


def statuses(doc) -> dict[str, str]:
    return {c["name"]: c["status"] for c in doc["checks"]}


def read(path):
    with open(path) as f:
        return json.load(f)


def test_good_device_passes_every_group(fake_groups, tmp_path, capsys):
    rc = conform.run(conform_args(out=str(tmp_path), groups="F1-ok,F5-ok"))
    doc = read(tmp_path / "conformance.json")
    assert rc == 0, capsys.readouterr()
    assert doc["verdict"]["status"] == "quick" and not doc["passed"]   # a --quick subset: never passed
    assert doc["run"]["complete"] and doc["run"]["isolation"] == "subprocess"
    assert set(statuses(doc)) == {"F1-ok/greedy/V8", "F5-ok/greedy/V11"}
    assert sorted(os.listdir(tmp_path / "groups")) == ["F1-ok.json", "F5-ok.json"]


def test_abort_and_exception_are_errors_of_their_group_only(fake_groups, tmp_path, capsys):
    rc = conform.run(conform_args(device="specsim_fakedev:make_aborting", out=str(tmp_path),
                                  groups="F1-ok,F2-abort,F5-ok"))
    assert rc == 1
    doc = read(tmp_path / "conformance.json")
    got = statuses(doc)
    assert got == {"F1-ok/greedy/V8": "pass", "F2-abort/crashed": "error", "F5-ok/greedy/V11": "pass"}
    crash = next(c for c in doc["checks"] if c["name"] == "F2-abort/crashed")
    assert "SIGABRT" in crash["detail"]
    assert "misbehave" in crash["detail"]  # faulthandler's Python stack names the device's function
    assert doc["run"]["group_outcomes"]["F2-abort"]["outcome"] == "crashed"
    assert doc["summary"] == {"pass": 2, "fail": 0, "not_supported": 0, "error": 1}


def test_raising_device_is_an_error_with_its_message(fake_groups, tmp_path):
    rc = conform.run(conform_args(device="specsim_fakedev:make_raising", out=str(tmp_path), groups="F4-raise,F1-ok"))
    doc = read(tmp_path / "conformance.json")
    assert rc == 1
    err = [c for c in doc["checks"] if c["status"] == "error"]
    assert len(err) == 1 and "driver returned status 700" in err[0]["detail"]
    assert statuses(doc)["F1-ok/greedy/V8"] == "pass"


def test_hang_is_a_timeout_error_and_the_rest_still_runs(fake_groups, tmp_path):
    rc = conform.run(conform_args(device="specsim_fakedev:make_hanging", out=str(tmp_path),
                                  groups="F3-hang,F1-ok", group_timeout=2.0))
    doc = read(tmp_path / "conformance.json")
    assert rc == 1
    assert statuses(doc) == {"F3-hang/timeout": "error", "F1-ok/greedy/V8": "pass"}
    hang = next(c for c in doc["checks"] if c["name"] == "F3-hang/timeout")
    assert "time limit of 2 s" in hang["detail"]
    assert "misbehave" in hang["detail"]  # where it hung (faulthandler on SIGUSR1)


def test_wrong_token_is_a_fail_not_an_error(fake_groups, tmp_path):
    rc = conform.run(conform_args(device="specsim_fakedev:make_wrong_token", out=str(tmp_path), groups="F1-ok"))
    doc = read(tmp_path / "conformance.json")
    assert rc == 1 and statuses(doc) == {"F1-ok/greedy/V8": "fail"}


def test_resume_skips_finished_groups(fake_groups, tmp_path, monkeypatch):
    rc = conform.run(conform_args(out=str(tmp_path), groups="F1-ok,F5-ok"))
    assert rc == 0
    # simulate an interruption after the first group: its file stays, the second's is gone
    os.remove(tmp_path / "groups" / "F5-ok.json")
    first = read(tmp_path / "groups" / "F1-ok.json")
    ran = []
    from specsim.conformance.run import isolation
    real = isolation.run_group_in_subprocess
    monkeypatch.setattr(isolation, "run_group_in_subprocess",
                        lambda group, *a, **k: ran.append(group) or real(group, *a, **k))
    rc = conform.run(conform_args(out=str(tmp_path), groups="F1-ok,F5-ok", resume=True))
    doc = read(tmp_path / "conformance.json")
    assert rc == 0 and ran == ["F5-ok"]
    assert set(statuses(doc)) == {"F1-ok/greedy/V8", "F5-ok/greedy/V11"}
    assert read(tmp_path / "groups" / "F1-ok.json") == first
    assert doc["run"]["group_outcomes"]["F1-ok"]["resumed"] is True


def test_resume_refuses_a_different_run(fake_groups, tmp_path, capsys):
    assert conform.run(conform_args(out=str(tmp_path), groups="F1-ok")) == 0
    capsys.readouterr()
    rc = conform.run(conform_args(out=str(tmp_path), groups="F1-ok", seed=7, resume=True))
    assert rc == 2
    err = capsys.readouterr().err
    assert "seed: stored 0, now 7" in err and "without --resume" in err


def test_resume_needs_out_and_a_stored_run(fake_groups, tmp_path, capsys):
    assert conform.run(conform_args(resume=True)) == 2
    assert conform.run(conform_args(out=str(tmp_path / "nothing"), resume=True)) == 2
    assert "does not exist" in capsys.readouterr().err


def test_device_load_failure_is_exit_3(fake_groups, capsys):
    from specsim import cli  # the dispatcher turns any command's DeviceLoadError into exit 3
    assert cli.main(["conform", "--device", "specsim_fakedev:make_unloadable"]) == 3
    assert "libacme_npu.so" in capsys.readouterr().err


def test_unknown_group_is_usage_error(fake_groups, capsys):
    assert conform.run(conform_args(groups="F1-ok,nope")) == 2
    assert "unknown ['nope']" in capsys.readouterr().err


def test_in_process_mode_still_works(fake_groups, tmp_path):
    rc = conform.run(conform_args(out=str(tmp_path), groups="F1-ok,F4-raise", in_process=True,
                                  device="specsim_fakedev:make_raising"))
    doc = read(tmp_path / "conformance.json")
    assert rc == 1 and doc["run"]["isolation"] == "in-process"
    assert statuses(doc)["F4-raise/crashed"] == "error"


def test_progress_is_quiet_off_a_terminal(fake_groups, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("SPECSIM_PROGRESS", raising=False)
    conform.run(conform_args(out=str(tmp_path), groups="F1-ok"))
    assert "\r" not in capsys.readouterr().err


def test_progress_draws_on_a_terminal(monkeypatch):
    import io

    from specsim.conformance.run.progress import Progress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("SPECSIM_PROGRESS", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    stream = Tty()
    bar = Progress(total=2, stream=stream)
    bar.start("L1-keyed")
    bar.done("pass")
    bar.close()
    text = stream.getvalue()
    assert "\r[" in text and "1/2" in text and "L1-keyed" in text


def test_out_writes_report_files_even_when_a_group_crashed(fake_groups, tmp_path, capsys):
    rc = conform.run(conform_args(device="specsim_fakedev:make_aborting", out=str(tmp_path),
                                  groups="F1-ok,F2-abort", no_report=False))
    assert rc == 1
    for name in ("conformance.json", "report.html", "report.md", "report.json"):
        assert (tmp_path / name).stat().st_size > 0, name
    md = (tmp_path / "report.md").read_text()
    assert "F2-abort/crashed" in md and "SIGABRT" in md


DRIVER = """
import sys
from specsim.conformance.run import runner
from specsim_fakegroups import FAKE_GROUPS
runner.GROUPS.clear()
runner.GROUPS.update(FAKE_GROUPS)
from specsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_interrupted_run_resumes(tmp_path):
    """Ctrl-C while a group hangs: exit 130, the finished group is kept; --resume runs only the rest."""
    import signal
    import subprocess
    import sys
    import time

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.getcwd()]), SPECSIM_PROGRESS="0")
    env.pop("FAKEDEV_NO_HANG", None)
    cmd = [sys.executable, "-c", DRIVER, "conform", "--device", "specsim_fakedev:make_hanging", "--quick",
           "--groups", "F1-ok,F3-hang,F5-ok", "--out", str(tmp_path), "--no-report", "--exit-zero-on", "quick,partial"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "groups" / "F1-ok.json").exists():
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    time.sleep(1.0)  # F3-hang is now running (and hanging)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "--resume" in err
    doc = read(tmp_path / "conformance.json")
    assert doc["run"]["complete"] is False and doc["run"]["pending_groups"] == ["F3-hang", "F5-ok"]
    assert doc["verdict"]["status"] == "incomplete" and doc["passed"] is False
    first = (tmp_path / "groups" / "F1-ok.json").stat().st_mtime_ns

    env["FAKEDEV_NO_HANG"] = "1"  # the vendor fixed the driver, same device spec
    done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = read(tmp_path / "conformance.json")
    assert doc["run"]["complete"] is True and doc["verdict"]["status"] == "quick"
    assert set(statuses(doc)) == {"F1-ok/greedy/V8", "F3-hang/greedy/V17", "F5-ok/greedy/V11"}
    assert (tmp_path / "groups" / "F1-ok.json").stat().st_mtime_ns == first  # not run again


def test_groups_side_by_side_give_the_same_document(fake_groups, tmp_path):
    """--jobs 3: every group in its own process, three at a time; the checks, their order and the verdict are
    those of the run one group at a time, a crash still its own group's error."""
    one = tmp_path / "one"
    three = tmp_path / "three"
    for out, jobs in ((one, 1), (three, 3)):
        conform.run(conform_args(device="specsim_fakedev:make_aborting", out=str(out), jobs=jobs))
    a, b = read(one / "conformance.json"), read(three / "conformance.json")
    assert [(c["name"], c["status"]) for c in a["checks"]] == [(c["name"], c["status"]) for c in b["checks"]]
    assert a["verdict"]["status"] == b["verdict"]["status"]
    assert b["run"]["jobs"] == 3 and b["run"]["complete"] is True
    assert b["run"]["finished_groups"] == list(FAKE_GROUPS)
    assert b["run"]["group_outcomes"]["F2-abort"]["outcome"] == "crashed"


def test_jobs_must_be_positive_and_in_processes(fake_groups, capsys):
    assert conform.run(conform_args(jobs=0)) == 2
    assert "--jobs: must be >= 1" in capsys.readouterr().err
    assert conform.run(conform_args(jobs=2, in_process=True)) == 2
    assert "drop --in-process" in capsys.readouterr().err


def test_interrupted_side_by_side_run_stops_every_group_and_resumes(tmp_path):
    """Ctrl-C with --jobs 2 while one group hangs and the others finished: exit 130 within seconds (the hanging
    group's process is stopped from the main thread), the finished groups are kept, --resume runs the rest."""
    import signal
    import subprocess
    import sys
    import time

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.getcwd()]), SPECSIM_PROGRESS="0")
    env.pop("FAKEDEV_NO_HANG", None)
    cmd = [sys.executable, "-c", DRIVER, "conform", "--device", "specsim_fakedev:make_hanging", "--quick",
           "--groups", "F1-ok,F3-hang,F5-ok", "--out", str(tmp_path), "--no-report", "--exit-zero-on", "quick,partial",
           "--jobs", "2"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not all((tmp_path / "groups" / f"{g}.json").exists() for g in ("F1-ok", "F5-ok")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    doc = read(tmp_path / "conformance.json")
    assert doc["run"]["pending_groups"] == ["F3-hang"] and doc["run"]["interrupted"]["group"] == "F3-hang"
    assert doc["run"]["group_outcomes"]["F3-hang"]["outcome"] == "interrupted"

    env["FAKEDEV_NO_HANG"] = "1"
    done = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = read(tmp_path / "conformance.json")
    assert doc["run"]["complete"] is True
    assert [c["name"] for c in doc["checks"]] == ["F1-ok/greedy/V8", "F3-hang/greedy/V17", "F5-ok/greedy/V11"]
