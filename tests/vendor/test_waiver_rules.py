"""What a waiver may hide: one check (or a narrow pattern for its variants), with a real reason and a link;
never a crash, a time-out or the core's evidence; and one verdict whichever route applies the file
(``specsim conform --waivers`` and ``pytest --specsim-waivers``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from property_tests.plugin import judge_conformance
from specsim import cli
from specsim.conformance.verdict import profiles
from specsim.conformance.run import runner
from specsim.conformance.core.results import CheckResult
from specsim.conformance.verdict.conform_waivers import WaiverFile, apply, load_file, summary_lines
from specsim.conformance.verdict.waivers import Waiver, WaiverError, load

LINK = "https://tracker.acme.example/SPEC-"
GOOD = "our top-p keeps one tied token; fixed in driver 2.4"
DEVICE = "tests.fixtures.one_edge_wrong:make_vocab_one_wrong"
GROUPS = ["capabilities", "L1-edges"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def waiver_file(tmp_path, *entries: dict, name: str = "waivers.toml") -> str:
    body = "\n".join("[[waiver]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in e.items()) for e in entries)
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def entry(check: str, reason: str = GOOD, **more) -> dict:
    return {"check": check, "reason": reason, "link": LINK + "1", **more}


# ----------------------------------------------------------------------------- rules at load


@pytest.mark.parametrize("bad, rule", [
    (entry("conformance:*"), "two whole segments"),
    (entry("conformance:L1/*"), "two whole segments"),
    (entry("conformance:L1/edge/*"), "would cover a whole area"),
    (entry("conformance:L2/*batch-invariance"), "two whole segments"),
    (entry("conformance:L1/edge/*/V8"), "only in the pattern's last '/'-segment"),
    (entry("conformance:L1/edge/u0-masked-point", "known"), "placeholder ('known')"),
    (entry("conformance:L1/edge/u0-masked-point", "Flaky!"), "placeholder ('Flaky!')"),
    (entry("conformance:L1/edge/u0-masked-point", "n/a"), "placeholder"),
    (entry("conformance:L1/edge/u0-masked-point", "todo wip known flaky"), "placeholder"),
    (entry("conformance:L1/edge/u0-masked-point", "off by one"), "3 word(s), fewer than 4"),
    (entry("conformance:L1/edge/u0-masked-point", link="SPEC-1"), "must be the URL"),
    (entry("conformance:L1-injected/crashed"), "a record of a group that could not be judged"),
    (entry("conformance:L3-statistical/timeout"), "a record of a group that could not be judged"),
    (entry("conformance:L1-edges/missing"), "a record of a group that could not be judged"),
    (entry("conformance:L1/injected/full-mixed/V8/float32"), "names the core's evidence"),
    (entry("conformance:L1/injected/full-*"), "names the core's evidence"),
    (entry("conformance:L3/v8-far/r0/*"), "names the core's evidence"),
    (entry("conformance:capabilities/top_p"), "names the core's evidence"),
    (entry("property_tests/test_device_exact.py", "wip"), "placeholder ('wip')"),
    (entry("property_tests/test_conformance_groups.py::test_conformance_verdict"), "names the shipped verdict tests"),
    (entry("test_conformance_group_passes[L1-edges]"), "names the shipped verdict tests"),
])
def test_a_waiver_that_could_hide_too_much_is_refused_at_load_naming_the_rule(tmp_path, bad, rule):
    path = waiver_file(tmp_path, entry("conformance:L1/edge/top-p-cut-ties"), bad)
    with pytest.raises(WaiverError) as e:
        load(path)
    assert f"{path}, entry 2" in str(e.value) and rule in str(e.value), str(e.value)


def test_narrow_patterns_exact_names_and_judged_core_records_load(tmp_path):
    path = waiver_file(tmp_path, entry("conformance:L1/edge/u0-*"),
                       entry("conformance:L1-sampler/edge/penalty-zeroes-draft/*"),
                       entry("conformance:L1/sizes/batch-B*"),
                       entry("conformance:capabilities/point_proposals"),
                       entry("conformance:L1/injected/full-mixed/V8/float32", deviation="first-token",
                             judgement="loss of losslessness"),
                       entry("property_tests/test_device_exact.py::test_device_gives_each_edge_its_documented_answer"
                             "[u0-*]"))
    u0, penalty, batch, optional, record, test = load(path)
    assert [u0.matches_check(n) for n in ("L1/edge/u0-masked-point", "L1/edge/u0-zero-target-full",
                                           "L1/edge/u-equal-ratio")] == [True, True, False]
    assert penalty.matches_check("L1-sampler/edge/penalty-zeroes-draft/vllm/V151936")
    assert batch.matches_check("L1/sizes/batch-B1024") and not batch.matches_check("L1/sizes/vocab-V127")
    assert optional.matches_check("capabilities/point_proposals") and record.deviation == "first-token"
    assert not test.conformance


def test_the_fields_own_waiver_files_load_under_the_rules():
    import glob
    import devices.field
    paths = sorted(glob.glob(os.path.join(os.path.dirname(devices.field.__file__), "*_waivers.toml")))
    assert len(paths) >= 4
    for path in paths:
        assert load(path), path


# ----------------------------------------------------------------------------- refused at apply


def _file(*waivers: Waiver) -> WaiverFile:
    return WaiverFile("f.toml", "0" * 64, waivers)


def _w(check: str, n: int = 1) -> Waiver:
    return Waiver(check=check, reason=GOOD, issue=LINK + str(n), source=f"f.toml, entry {n}")


CAPS = profiles.Capabilities(injected_noise=True, rng="none", max_vocab_size=262_144, max_k=8)  # the core, declared
CORE_PASSING = [CheckResult("capabilities/greedy", "L0", "pass", extra={"core": True}),
                CheckResult("L1/injected/full-mixed/V8/float64", "L1", "pass")]


@pytest.mark.parametrize("failing, why", [
    (CheckResult("L1-injected/crashed", "L1", "error", "SIGABRT"), "a record of a group that was not judged (crashed)"),
    (CheckResult("L3-statistical/timeout", "L3", "error", "past 3600 s"), "(timeout)"),
    (CheckResult("L1/edge/u0-masked-point/mutated-input", "L1", "error"), "(mutated-input)"),
    (CheckResult("L1/injected/full-mixed/V8/float32", "L1", "fail"), "carries the core's evidence"),
    (CheckResult("capabilities/top_p", "L0", "fail", extra={"core": True}), "carries the core's evidence"),
])
def test_a_crash_or_the_cores_evidence_keeps_failing_unwaived_and_the_entry_is_refused(failing, why):
    """Whatever a waiver says (here built past the loader, as a pattern could match it), these stay failing."""
    w = _w("conformance:" + failing.name.rsplit("/", 1)[0] + "/*")
    out, record = apply(CORE_PASSING + [failing], _file(w), device_spec="dev")
    assert out[-1].waiver is None and out[-1].status == failing.status
    (refused,) = record["refused"]
    assert refused["source"] == "f.toml, entry 1" and refused["checks"] == [failing.name] and why in refused["why"]
    assert record["counts"] == {"waived": 0, "refused": 1, "stale": 0, "not_applicable": 0}
    verdict = profiles.verdict(CAPS,
                               [r.to_json() for r in out], ["capabilities", "L1-injected"])
    assert verdict["status"] == "fail" and verdict["waived"] == []
    lines = summary_lines(record)
    assert "0 failing check(s) waived, 1 entry refused, 0 stale" in lines[0]
    assert lines[1].startswith(f"  refused: {w.check!r} (f.toml, entry 1) on {failing.name}")
    assert "still failing" in lines[1]


def test_the_record_counts_waived_refused_stale_and_not_applicable():
    results = CORE_PASSING + [CheckResult("L1/edge/top-p-cut-ties", "L1", "fail"),
                              CheckResult("L1/injected/full-long/V8/float32", "L1", "fail")]
    wf = _file(_w("conformance:L1/edge/top-p-cut-ties", 1), _w("conformance:L1/injected/full-long/V8/float32", 2),
               _w("conformance:L1/edge/u0-masked-point", 3),
               Waiver(check="conformance:L1/edge/race-tie", reason=GOOD, issue=LINK, devices=("other",), source="4"))
    out, record = apply(results, wf, device_spec="dev")
    assert [r.waiver is not None for r in out] == [False, False, True, False]
    assert record["counts"] == {"waived": 1, "refused": 1, "stale": 1, "not_applicable": 1}
    verdict = runner.verdict_of(type("D", (), {"capabilities": CAPS})(),
                                out, runner.Context(), ["capabilities", "L1-injected", "L1-edges"])
    assert verdict["status"] == "fail" and verdict["waived"] == ["L1/edge/top-p-cut-ties"]


# ----------------------------------------------------------------------------- one verdict, both routes


@pytest.fixture(scope="module")
def edge_results():
    """``capabilities`` and ``L1-edges`` once, quick, against a device wrong at ``L1/edge/vocab-one`` only (with its
    injected noise, on its keyed streams, in every other dtype it declares, at every batch size and among filler
    requests, whose V = 1 rows are wrong too: the same code)."""
    from devices.registry import load as load_device
    results = runner.run_conformance(load_device(DEVICE), runner.Context(seed=0, quick=True), GROUPS)
    assert [r.name for r in results if r.status in ("fail", "error")] == VOCAB_ONE_FAILURES
    return results


SIXTEEN_AND_32 = ("float16", "bfloat16", "float32")
VOCAB_ONE_FAILURES = [
    "L1/edge/vocab-one", "L1/edge/vocab-one/keyed", *(f"L1/edge/vocab-one/{d}" for d in SIXTEEN_AND_32),
    *(f"L1/edge/vocab-one/{twin}batches"   # SPEC 1.9's, and 1.14's every dtype on the keyed streams
      for twin in ("", "keyed/", *(f"{d}/" for d in SIXTEEN_AND_32), *(f"{d}/keyed/" for d in SIXTEEN_AND_32))),
    *(f"L1/{area}/vocab-one/{twin}mixed"   # SPEC 1.10's: the fillers share the edge's V = 1
      for twin in ("", "keyed/", *(f"{d}/" for d in SIXTEEN_AND_32), *(f"{d}/keyed/" for d in SIXTEEN_AND_32))
      for area in ("edge", "edge-neighbours")),
    *(f"L1/{area}/vocab-one/{twin}mixed-{kind}" for twin in ("", "keyed/")   # 1.11's, 1.13's keyed twins
      for kind in ("greedy", "sampled", "top-p") for area in ("edge", "edge-neighbours"))]   # (no top-k at V = 1)


def by_conform(tmp_path, monkeypatch, results, waivers: str | None) -> tuple[int, dict | None]:
    """``specsim conform --quick --in-process`` on ``results`` (the groups' own run, shared by both routes)."""
    monkeypatch.setattr(runner, "run_conformance", lambda device, ctx, names, scopes=None: list(results))
    out = tmp_path / "conform"
    rc = cli.main(["conform", "--quick", "--in-process", "--no-report", "--device", DEVICE,
                   "--groups", ",".join(GROUPS), "--out", str(out)] + (["--waivers", waivers] if waivers else []))
    if rc == 2:
        return rc, None
    return rc, json.loads((out / "conformance.json").read_text())


def by_pytest(results, waivers: str | None) -> dict:
    """The shipped conformance tests' judgement (``property_tests.plugin.judge_conformance``) of ``results``."""
    from devices.registry import load as load_device
    wf = load_file(waivers, option="--specsim-waivers") if waivers else None
    _, record, verdict = judge_conformance(load_device(DEVICE), DEVICE, list(results), wf,
                                           runner.Context(seed=0, quick=True), GROUPS)
    return {"verdict": verdict, "waivers": record}


def test_both_routes_give_one_verdict_for_one_device_and_waiver_file(tmp_path, monkeypatch, edge_results, capsys):
    rc, doc = by_conform(tmp_path, monkeypatch, edge_results, None)
    assert rc == 1 and doc["verdict"]["status"] == by_pytest(edge_results, None)["verdict"]["status"] == "fail"

    path = waiver_file(tmp_path, entry("conformance:L1/edge/vocab-one*", "our V = 1 path accepts no draft; driver 2.4"),
                       entry("conformance:L1/edge-neighbours/vocab-one*", "our V = 1 path accepts no draft, on the "
                             "filler requests too; driver 2.4"),
                       entry("conformance:L1/edge/u0-*"))
    rc, doc = by_conform(tmp_path, monkeypatch, edge_results, path)
    other = by_pytest(edge_results, path)
    assert rc == 5 and doc["verdict"]["status"] == other["verdict"]["status"] == "quick"   # QUICK: exit 5
    assert doc["verdict"]["waived"] == other["verdict"]["waived"] == VOCAB_ONE_FAILURES
    assert doc["verdict"]["reasons"] == other["verdict"]["reasons"]
    assert doc["waivers"]["counts"] == other["waivers"]["counts"] == {"waived": 41, "refused": 0, "stale": 1,
                                                                        "not_applicable": 0}   # checks waived
    capsys.readouterr()

    wild = waiver_file(tmp_path, entry("conformance:*", "known"), name="wild.toml")
    assert by_conform(tmp_path, monkeypatch, edge_results, wild)[0] == 2
    said = capsys.readouterr().err
    with pytest.raises(WaiverError) as e:
        by_pytest(edge_results, wild)
    assert str(e.value) in said and f"{wild}, entry 1: 'reason' must say what deviates" in str(e.value)


def _pytest(tmp_path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]),
               SPECSIM_DEVICE_SURVEY="0")
    env.pop("SPECSIM_DEVICE", None)
    env.pop("SPECSIM_WAIVERS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
                           "property_tests/test_conformance_groups.py", f"--specsim-device={DEVICE}", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_pytest_route_applies_the_file_as_conform_does(tmp_path):
    """The shipped group test passes with the edge waived, and a wildcard file is the same usage error as in
    ``specsim conform`` (about 10 s)."""
    path = waiver_file(tmp_path, entry("conformance:L1/edge/vocab-one*", "our V = 1 path accepts no draft; driver 2.4"),
                       entry("conformance:L1/edge-neighbours/vocab-one*", "our V = 1 path accepts no draft, on the "
                             "filler requests too; driver 2.4"))
    r = _pytest(tmp_path, "-k", "group_passes and L1-edges", f"--specsim-waivers={path}")
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert "41 failing check(s) waived, 0 entries refused" in r.stdout   # every form of the edge and its neighbours

    wild = waiver_file(tmp_path, entry("conformance:L1/edge/*"), name="wild.toml")
    r = _pytest(tmp_path, "-k", "group_passes and L1-edges", f"--specsim-waivers={wild}")
    assert r.returncode == 4, r.stdout[-2000:] + r.stderr[-2000:]
    assert f"{wild}, entry 1" in r.stderr and "would cover a whole area" in r.stderr
