"""``specsim conform --waivers FILE``: a waived failure keeps its status and says so everywhere; stale entries
are listed; a waiver never waives the core's evidence (refused, the check still failing); a bad file is a
usage error; ``--resume`` refuses another file."""

from __future__ import annotations

import json

import pytest

from devices.protocol import Capabilities
from specsim.conformance.verdict.waivers import Waiver
from specsim import cli
from specsim.conformance.verdict import profiles
from specsim.conformance.run import runner
from specsim.conformance.run.document import document
from specsim.conformance.core.results import CheckResult
from specsim.conformance.verdict.conform_waivers import WaiverFile, apply
from specsim_fakegroups import FAKE_GROUPS

LINK = "https://tracker.acme.example/SPEC-"
GOOD = "greedy token off by one in driver 2.3"
CAPABILITIES = Capabilities(injected_noise=True, rng="none", max_vocab_size=262_144, max_k=8)  # the core, declared


def waiver_file(tmp_path, *entries: dict, name: str = "waivers.toml") -> str:
    body = "\n".join("[[waiver]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in e.items()) for e in entries)
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def conform(*argv: str) -> int:
    return cli.main(["conform", "--quick", "--no-report", "--exit-zero-on", "quick,partial", *argv])


def read(path) -> dict:
    with open(path) as f:
        return json.load(f)


# ----------------------------------------------------------------------------- end to end, real group


def test_a_core_failure_is_never_waived_and_stale_waivers_are_listed(tmp_path, capsys):
    """A device whose first token is wrong fails L1-injected; an entry naming those checks loads only as a judged
    deviation record, waives none of them (refused, with why), and the verdict is FAIL."""
    path = waiver_file(tmp_path,
                       {"check": "conformance:L1/injected/full-*", "reason": "first token off by one",
                        "link": LINK + "1", "deviation": "first-token", "judgement": "loss of losslessness"},
                       {"check": "conformance:L1/edge/u0-*", "reason": "an edge this run leaves out", "link": LINK + "2"},
                       {"check": "property_tests/test_device_exact.py", "reason": "the property test counterpart only",
                        "link": LINK + "3"})
    out = tmp_path / "run"
    rc = conform("--device", "specsim_fakedev:make_wrong_reference", "--groups", "L1-injected",
                 "--waivers", path, "--out", str(out))
    printed = capsys.readouterr().out
    assert rc == 1, printed
    doc = read(out / "conformance.json")
    failing = [c for c in doc["checks"] if c["status"] in ("fail", "error")]
    assert failing and not any(c.get("waiver") for c in failing)   # the core's evidence keeps failing, unwaived
    (refused,) = doc["waivers"]["refused"]
    assert refused["check"] == "conformance:L1/injected/full-*" and "carries the core's evidence" in refused["why"]
    assert refused["checks"] and set(refused["checks"]) <= {c["name"] for c in failing}
    assert doc["waivers"]["counts"] == {"waived": 0, "refused": 1, "stale": 1, "not_applicable": 1}
    assert doc["summary"]["fail"] == len(failing)
    verdict = doc["verdict"]
    assert verdict["status"] == "fail" and not doc["passed"] and verdict["waived"] == []
    assert [e["check"] for e in doc["waivers"]["stale"]] == ["conformance:L1/edge/u0-*"]
    assert "matched no check of this run" in doc["waivers"]["stale"][0]["why"]
    assert [e["check"] for e in doc["waivers"]["not_applicable"]] == ["property_tests/test_device_exact.py"]
    assert "verdict: FAIL" in printed and "1 entry refused" in printed
    assert "refused: 'conformance:L1/injected/full-*'" in printed and "still failing" in printed
    assert "stale: 'conformance:L1/edge/u0-*'" in printed

    from reports import render_directory
    render_directory([str(out)], str(out), with_plots=False)
    md = (out / "report.md").read_text()
    assert "Waivers that waived nothing" in md and "conformance:L1/edge/u0-*" in md
    assert "matched no check of this run" in md


@pytest.mark.parametrize("entry, said", [
    ({"check": "conformance:L1/injected/*", "link": LINK + "1"}, "entry 1: 'reason' is required"),
    ({"check": "conformance:L1/injected/*", "reason": "r"}, "entry 1: 'issue' is required (also spelt 'link'"),
    ({"check": "conformance:L1/injected/*", "reason": "r", "link": "SPEC-1"}, "must be the URL"),
    ({"check": "conformance:L1/injected/*", "reason": "r", "link": LINK + "1", "issue": LINK + "2"},
     "'link' and 'issue' both mean 'issue'"),
])
def test_a_waiver_without_reason_or_link_is_a_usage_error(tmp_path, capsys, entry, said):
    path = waiver_file(tmp_path, entry)
    assert conform("--device", "specsim_fakedev:make_wrong_reference", "--groups", "L1-injected",
                   "--waivers", path) == 2
    err = capsys.readouterr().err
    assert f"--waivers {path}" in err or path in err
    assert said in err


def test_a_missing_waiver_file_is_a_usage_error(tmp_path, capsys):
    assert conform("--device", "specsim_fakedev:make_good", "--waivers", str(tmp_path / "absent.toml")) == 2
    assert "cannot read" in capsys.readouterr().err


# ----------------------------------------------------------------------------- end to end, fake groups


@pytest.fixture
def fake_groups(monkeypatch):
    monkeypatch.setattr(runner, "GROUPS", dict(FAKE_GROUPS))


def test_waived_failure_outside_the_core_is_said_and_exits_0(fake_groups, tmp_path, capsys):
    path = waiver_file(tmp_path, {"check": "conformance:F1-ok/greedy/V8", "reason": GOOD, "link": LINK + "7"},
                       {"check": "conformance:F1-ok/greedy/V8", "reason": "the same deviation, for this device only",
                        "link": LINK + "8", "devices": ["specsim_fakedev:make_wrong_token"]})
    rc = conform("--device", "specsim_fakedev:make_wrong_token", "--groups", "F1-ok", "--waivers", path,
                 "--out", str(tmp_path / "run"))
    doc = read(tmp_path / "run" / "conformance.json")
    assert rc == 0, capsys.readouterr()
    # a --quick run: QUICK, never a verdict; at full size this run would be PARTIAL (the core's evidence not run)
    assert doc["verdict"]["status"] == "quick" and doc["verdict"]["waived"] == ["F1-ok/greedy/V8"]
    assert "it would be PARTIAL" in doc["verdict"]["reasons"][0]
    assert any("1 failing check(s) waived" in r and "none carries the core's evidence" in r
               for r in doc["verdict"]["reasons"])
    stale = doc["waivers"]["stale"]
    assert [e["check"] for e in stale] == ["conformance:F1-ok/greedy/V8"] and "by an earlier entry" in stale[0]["why"]


def test_a_waiver_of_a_passing_check_is_stale(fake_groups, tmp_path):
    path = waiver_file(tmp_path, {"check": "conformance:F1-ok/greedy/V8", "reason": "failed in driver 2.3, fixed since?",
                                  "link": LINK + "9"})
    assert conform("--device", "specsim_fakedev:make_good", "--groups", "F1-ok", "--waivers", path,
                   "--out", str(tmp_path / "run")) == 0
    doc = read(tmp_path / "run" / "conformance.json")
    assert doc["checks"][0]["status"] == "pass" and "waiver" not in doc["checks"][0]
    assert doc["waivers"]["waived"] == [] and "none failing (1 pass)" in doc["waivers"]["stale"][0]["why"]


def test_resume_refuses_another_waiver_file(fake_groups, tmp_path, capsys):
    first = waiver_file(tmp_path, {"check": "conformance:F1-ok/greedy/V8", "reason": GOOD, "link": LINK + "1"})
    out = str(tmp_path / "run")
    assert conform("--device", "specsim_fakedev:make_wrong_token", "--groups", "F1-ok", "--waivers", first,
                   "--out", out) == 0
    edited = waiver_file(tmp_path, {"check": "conformance:F1-ok/greedy/V8", "reason": GOOD + " (edited)",
                                    "link": LINK + "1"}, name="b.toml")
    capsys.readouterr()
    for other in (["--waivers", edited], []):
        assert conform("--device", "specsim_fakedev:make_wrong_token", "--groups", "F1-ok", *other,
                       "--out", out, "--resume") == 2
        assert "waivers: the stored run used a waiver file" in capsys.readouterr().err
    assert conform("--device", "specsim_fakedev:make_wrong_token", "--groups", "F1-ok", "--waivers", first,
                   "--out", out, "--resume") == 0


def test_in_process_applies_the_waivers_too(fake_groups, tmp_path):
    path = waiver_file(tmp_path, {"check": "conformance:F1-ok/greedy/V8", "reason": GOOD, "link": LINK + "1"})
    assert conform("--device", "specsim_fakedev:make_wrong_token", "--groups", "F1-ok", "--waivers", path,
                   "--in-process", "--out", str(tmp_path / "run")) == 0
    doc = read(tmp_path / "run" / "conformance.json")
    assert doc["checks"][0]["waiver"]["source"].endswith("entry 1") and doc["verdict"]["waived"] == ["F1-ok/greedy/V8"]


# ----------------------------------------------------------------------------- the verdict and apply()


def _passing_core() -> list[dict]:
    return [{"name": "capabilities/greedy", "layer": "L0", "status": "pass", "extra": {"core": True}},
            {"name": "L1/injected/full-mixed/V8/float32", "layer": "L1", "status": "pass"}]


def _waived(name: str, status: str = "fail", extra: dict | None = None) -> dict:
    return {"name": name, "layer": name.split("/")[0], "status": status, "extra": extra or {},
            "waiver": {"check": f"conformance:{name}", "reason": "known", "link": LINK + "1", "source": "f, entry 1"}}


def test_verdict_pass_with_waivers_only_outside_the_core():
    caps = CAPABILITIES
    ran = ["capabilities", "L1-injected", "L1-edges"]
    edge = profiles.verdict(caps, _passing_core() + [_waived("L1/edge/top-p-cut-ties")], ran)
    assert edge["status"] == "pass-with-waivers" and edge["waived"] == ["L1/edge/top-p-cut-ties"]
    assert "none carries the core's evidence" in edge["reasons"][0]
    for core in (_waived("L1/injected/full-mixed/V65/float32"), _waived("L3/v8-far/r0/pos0", "error"),
                 _waived("capabilities/top_p", extra={"core": True})):
        v = profiles.verdict(caps, _passing_core() + [core], ran)
        assert v["status"] == "fail" and "carries the core's evidence" in v["reasons"][0], core["name"]
    optional = profiles.verdict(caps, _passing_core() + [_waived("capabilities/point_proposals")], ran)
    assert optional["status"] == "pass-with-waivers"
    unwaived = profiles.verdict(caps, _passing_core() + [_waived("L1/edge/a"), {"name": "L1/edge/b", "status": "fail"}],
                                ran)
    assert unwaived["status"] == "fail"
    assert profiles.verdict(caps, _passing_core(), ran)["status"] == "pass"


def test_document_passes_pass_with_waivers():
    class Dev:
        name, capabilities = "d", CAPABILITIES
    results = [CheckResult.from_json(c) for c in _passing_core() + [_waived("L1/edge/x")]]
    doc = document("d", Dev(), runner.Context(), results)   # every group ran: a subset is at best PARTIAL
    assert doc["verdict"]["status"] == "pass-with-waivers" and doc["passed"]
    assert CheckResult.from_json(doc["checks"][-1]).waiver["link"] == LINK + "1"


def test_apply_waives_failures_only_for_the_devices_named():
    w = Waiver(check="conformance:L1/edge/*", reason="r", issue=LINK + "1", devices=("acme-npu",), source="f, entry 1")
    results = [CheckResult("L1/edge/a", "L1", "fail"), CheckResult("L1/edge/b", "L1", "error"),
               CheckResult("L1/edge/c", "L1", "not_supported")]
    mine, record = apply(results, WaiverFile("f", "0" * 64, (w,)), device_spec="pkg:make", device_name="acme-npu")
    assert [r.waiver is not None for r in mine] == [True, True, False]
    assert [r.status for r in mine] == ["fail", "error", "not_supported"]
    assert all(r.waiver is None for r in results)                 # the group's own results are not modified
    other, record = apply(results, WaiverFile("f", "0" * 64, (w,)), device_spec="torch", device_name="torch-cpu")
    assert all(r.waiver is None for r in other)
    assert "for devices ['acme-npu']" in record["not_applicable"][0]["why"] and record["stale"] == []


def test_a_waiver_on_a_passing_result_is_refused():
    with pytest.raises(ValueError, match="only a fail or error can be waived"):
        CheckResult("x", "L1", "pass", waiver={"check": "conformance:x", "reason": "r", "link": LINK, "source": "s"})


def test_help_documents_waivers_and_the_stop_statuses(capsys):
    with pytest.raises(SystemExit):
        cli.main(["conform", "--help"])
    text = capsys.readouterr().out
    for said in ("--waivers FILE", "PASS-WITH-WAIVERS", "143", "SIGTERM", "stale", "link"):
        assert said in text, said
