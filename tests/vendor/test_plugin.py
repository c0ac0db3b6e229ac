"""The ``specsim`` pytest plugin: device option and fixture, header, waivers; a broken device fails by name.

Each scenario runs pytest in a subprocess on a tiny test file, as a vendor would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from specsim.conformance.verdict.waivers import Waiver, WaiverError, check_id, load

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

TEST_FILE = textwrap.dedent('''
    from specsim_fakegroups import _greedy_case

    def test_greedy_tokens(specsim_device):
        batch, expected = _greedy_case(8, 3)
        out = specsim_device.verify(batch)
        assert [out.emitted(i) for i in range(3)] == [[int(t) for t in r] for r in expected]

    def test_name(specsim_device, specsim_device_spec):
        assert specsim_device.name.startswith("fake-") and specsim_device_spec.startswith("specsim_fakedev:")
''')


def plugin_installed() -> bool:
    return any(ep.name == "specsim" for ep in metadata.entry_points(group="pytest11"))


def run_pytest(tmp_path, *args, env=None) -> subprocess.CompletedProcess:
    (tmp_path / "test_vendor_suite.py").write_text(TEST_FILE)
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE, os.environ.get("PYTHONPATH", "")]))
    full_env.pop("SPECSIM_DEVICE", None)
    full_env["SPECSIM_DEVICE_SURVEY"] = "0"  # loading every known device costs seconds; one test keeps it
    full_env.update(env or {})
    plugin = [] if plugin_installed() else ["-p", "property_tests.plugin"]
    return subprocess.run([sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", "-rA",
                           "test_vendor_suite.py", *args], cwd=tmp_path, env=full_env, capture_output=True,
                          text=True, timeout=120)


def test_good_device_passes_and_the_header_names_it(tmp_path):
    r = run_pytest(tmp_path, "--specsim-device=specsim_fakedev:make_good", env={"SPECSIM_DEVICE_SURVEY": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "specsim: device 'specsim_fakedev:make_good' (--specsim-device)" in r.stdout
    assert "failed to load" in r.stdout or "every known device loads" in r.stdout
    assert "2 passed" in r.stdout


def test_broken_device_fails_and_names_the_check(tmp_path):
    r = run_pytest(tmp_path, env={"SPECSIM_DEVICE": "specsim_fakedev:make_wrong_token"})
    assert r.returncode == 1
    assert "FAILED test_vendor_suite.py::test_greedy_tokens" in r.stdout
    assert "($SPECSIM_DEVICE)" in r.stdout and "SPECSIM_DEVICE=specsim_fakedev:make_wrong_token" in r.stdout


def test_unloadable_device_errors_with_the_loader_message(tmp_path):
    r = run_pytest(tmp_path, "--specsim-device=specsim_fakedev:make_unloadable")
    assert r.returncode == 1
    assert "libacme_npu.so" in r.stdout and "did not load" in r.stdout


def test_waiver_turns_the_failure_into_xfail_and_stale_entries_are_reported(tmp_path):
    waivers = tmp_path / "acme.toml"
    waivers.write_text(textwrap.dedent('''
        [[waiver]]
        check = "test_vendor_suite.py::test_greedy_tokens"
        reason = "bonus row off by one in driver 2.3"
        issue = "https://tracker.acme.example/SPEC-123"

        [[waiver]]
        check = "property_tests/test_gone.py::*"
        reason = "the test was renamed upstream"
        issue = "https://tracker.acme.example/SPEC-99"
    '''))
    r = run_pytest(tmp_path, "--specsim-device=specsim_fakedev:make_wrong_token", f"--specsim-waivers={waivers}")
    assert r.returncode == 0, r.stdout
    assert "1 xfailed" in r.stdout and "SPEC-123" in r.stdout
    assert "1 waiver(s) matched no collected test" in r.stdout and "test_gone.py" in r.stdout


def test_conformance_waiver_judged_on_another_release_waives_nothing(tmp_path):
    """A ``conformance:`` waiver ``judged_on = "acme 1.0"`` waives its check on a device that runs acme 1.0 and
    leaves it unwaived (a failure) on one that runs acme 1.1; the summary names the release of the judgement."""
    (tmp_path / "acme_dev.py").write_text(textwrap.dedent('''
        import specsim_fakedev

        def make(release):
            device = specsim_fakedev.make_wrong_token()
            device.engine = f"acme {release}"
            return device

        def make_10():
            return make("1.0")

        def make_11():
            return make("1.1")
    '''))
    waivers = tmp_path / "acme.toml"
    waivers.write_text('[[waiver]]\ncheck = "conformance:L1/edge/a"\nreason = "the a edge deviates on acme"\n'
                       'issue = "https://x.example/1"\njudged_on = "acme 1.0"\n')
    suite = textwrap.dedent('''
        from specsim.conformance.core.results import CheckResult

        def test_waive(specsim_conformance_waivers):
            results, record = specsim_conformance_waivers([CheckResult("L1/edge/a", "L1", "fail")])
            print("KEPT", [r.name for r in results if r.waiver is None], "WAIVED", record["counts"]["waived"])
    ''')
    (tmp_path / "test_waive.py").write_text(suite)
    env = dict(os.environ, SPECSIM_DEVICE_SURVEY="0", PYTHONPATH=os.pathsep.join([ROOT, HERE, str(tmp_path)]))
    env.pop("SPECSIM_DEVICE", None)
    plugin = [] if plugin_installed() else ["-p", "property_tests.plugin"]
    outs = {}
    for release in ("10", "11"):
        r = subprocess.run([sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", "-s", "test_waive.py",
                            f"--specsim-device=acme_dev:make_{release}", f"--specsim-waivers={waivers}"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        outs[release] = r.stdout
    assert "KEPT [] WAIVED 1" in outs["10"]
    assert "KEPT ['L1/edge/a'] WAIVED 0" in outs["11"]
    assert "judged on acme 1.0: 'conformance:L1/edge/a'" in outs["11"] and "(acme 1.1)" in outs["11"]


def test_waiver_scoped_to_devices():
    w = Waiver(check="test_greedy_tokens", reason="r", issue="https://x.example/1", devices=("other-npu",))
    assert w.matches("test_vendor_suite.py::test_greedy_tokens", "test_greedy_tokens")
    assert not w.applies_to_device("specsim_fakedev:make_wrong_token") and w.applies_to_device("other-npu")
    assert Waiver(check="t", reason="r", issue="https://x.example/1").applies_to_device("anything")


def test_invalid_waivers_file_is_a_usage_error(tmp_path):
    waivers = tmp_path / "bad.toml"
    waivers.write_text('[[waiver]]\ncheck = "test_x"\nreason = "r"\n')
    r = run_pytest(tmp_path, "--specsim-device=specsim_fakedev:make_good", f"--specsim-waivers={waivers}")
    assert r.returncode == 4  # pytest's usage-error status
    assert "entry 1: 'issue' is required" in r.stderr


GOOD = "bonus row off by one in driver 2.3"


@pytest.mark.parametrize("entry, message", [
    ({"check": "t", "reason": "r"}, "'issue' is required"),
    ({"check": "t", "issue": "https://x.example/1"}, "'reason' is required"),
    ({"reason": "r", "issue": "https://x.example/1"}, "'check' is required"),
    ({"check": "t", "reason": "r", "issue": "SPEC-123"}, "must be the URL"),
    ({"check": "t", "reason": GOOD, "issue": "https://x.example/1", "resaon": "typo"}, "unknown key(s) ['resaon']"),
    ({"check": "t", "reason": GOOD, "issue": "https://x.example/1", "mark": "ignore"}, "'mark' must be one of"),
    ({"check": "t", "reason": " ", "issue": "https://x.example/1"}, "'reason' is required"),
    ({"check": "t", "reason": GOOD, "issue": "https://x.example/1", "judgement": "bad"}, "'judgement' must be one of"),
    ({"check": "t", "reason": "renamed upstream", "issue": "https://x.example/1"}, "2 word(s), fewer than 4"),
    ({"check": "t", "reason": "Known.", "issue": "https://x.example/1"}, "placeholder ('Known.')"),
])
def test_waiver_validation_names_entry_and_rule(tmp_path, entry, message):
    path = tmp_path / "w.json"
    path.write_text(json.dumps([{"check": "ok", "reason": GOOD, "issue": "https://x.example/0"}, entry]))
    with pytest.raises(WaiverError) as e:
        load(str(path))
    assert "entry 2" in str(e.value) and message in str(e.value)


def test_waiver_file_errors(tmp_path):
    with pytest.raises(WaiverError, match="cannot read"):
        load(str(tmp_path / "missing.toml"))
    (tmp_path / "x.toml").write_text("[[waiver]\n")
    with pytest.raises(WaiverError, match="not valid TOML"):
        load(str(tmp_path / "x.toml"))
    (tmp_path / "dup.json").write_text(json.dumps([{"check": "a", "reason": GOOD, "issue": "https://x.example/1"}] * 2))
    with pytest.raises(WaiverError, match="already waived"):
        load(str(tmp_path / "dup.json"))


def test_waiver_matching():
    exact = Waiver(check="property_tests/test_a.py::test_b", reason="r", issue="https://x.example/1")
    assert exact.matches("property_tests/test_a.py::test_b[float32]", "test_b[float32]")
    assert not exact.matches("property_tests/test_a.py::test_bc", "test_bc")
    wild = Waiver(check="*::test_b[float3?]", reason="r", issue="https://x.example/1")
    assert wild.matches("property_tests/test_a.py::test_b[float32]", "test_b[float32]")
    assert not wild.matches("property_tests/test_a.py::test_bf", "test_bf")
    file_level = Waiver(check="property_tests/test_a.py", reason="r", issue="https://x.example/1")
    assert file_level.matches("property_tests/test_a.py::test_z", "test_z")
    assert check_id("/site-packages/property_tests/test_a.py::test_b") == "property_tests/test_a.py::test_b"


def test_conformance_waivers_name_checks_not_tests():
    w = Waiver(check="conformance:L1/injected/full-*/V8/float32", reason="r", issue="https://x.example/1")
    assert w.conformance and w.matches_check("L1/injected/full-long/V8/float32")
    assert not w.matches_check("L1/injected/full-long/V65/float32")
    assert not w.matches("property_tests/test_conformance_groups.py::test_x", "test_x")


@pytest.mark.slow
def test_shipped_suite_fails_by_name_with_a_broken_device(tmp_path):
    """The real L1 property test against a device that bumps one token (about 10 s)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]))
    plugin = [] if plugin_installed() else ["-p", "property_tests.plugin"]
    r = subprocess.run([sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", "-q",
                        "property_tests/test_device_exact.py", "-k", "injected_noise and float64",
                        "--specsim-device=specsim_fakedev:make_wrong_reference"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert "FAILED property_tests/test_device_exact.py::test_device_matches_reference_given_injected_noise[float64]" \
        in r.stdout


def test_shipped_conformance_suite_gates_on_the_verdict(tmp_path):
    """A device that declares nothing fails no check it is asked, yet fails the shipped suite's verdict test
    (SPEC §10), naming the core it lacks (about 4 s)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, HERE]), SPECSIM_DEVICE_SURVEY="0")
    env.pop("SPECSIM_DEVICE", None)
    plugin = [] if plugin_installed() else ["-p", "property_tests.plugin"]
    r = subprocess.run([sys.executable, "-m", "pytest", *plugin, "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
                        "property_tests/test_conformance_groups.py", "-k", "verdict",
                        "--specsim-device=tests.fixtures.hollow_devices:make_hollow"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "FAILED property_tests/test_conformance_groups.py::test_conformance_verdict" in r.stdout
    assert "verdict FAIL: core profile not met" in r.stdout
