"""SPEC versions: a device is judged against the version it declares (SPEC §10, "Versions").

A device written against SPEC 1.0 (``tests/fixtures/spec_1_0_device.py``: no withdrawn drafts, no §12,
no node limit, 1.0's sglang rule) passes what it is sent when it declares 1.0, with the checks 1.1
added shown apart; the same code declaring 1.1 fails them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from devices.protocol import Capabilities, InvalidInput
from devices.torch_device import make_cpu_device
from reference import SPEC_VERSION, SPEC_VERSIONS
from specsim.conformance.verdict import profiles
from specsim.conformance.run import runner
from specsim.conformance.core import spec_versions
from specsim.conformance.checks.interface.capabilities import ROWS, check_row
from specsim.conformance.core.results import CheckResult
from specsim.conformance.run.runner import Context, run_group
from tests.fixtures.spec_1_0_device import Spec10Device

ROOT = Path(__file__).resolve().parents[1]
GROUPS = ["capabilities", "input-rules", "L1-tree-edges"]
NEW_IN_1_1 = {"capabilities/withdrawn_drafts", "input/withdrawn-not-bool", "input/withdrawn-draft-with-a-token-id",
              "capabilities/sampler-min_p", "L1/trees/edge/sglang-threshold-single-zero"}


def _run(device, monkeypatch) -> tuple[dict, dict]:
    """The groups ``GROUPS`` in process (the §11 tree edges as a group of their own) and their verdict."""
    monkeypatch.setitem(runner.GROUPS, "L1-tree-edges", "specsim.conformance.checks.trees.l1:edge_checks")
    checks = [r.to_json() for g in GROUPS for r in run_group(g, device, Context(quick=True))]
    return {c["name"]: c for c in checks}, profiles.verdict(device.capabilities, checks, GROUPS)


# --- the versions SPEC.md publishes ---------------------------------------------------------

def test_every_version_in_the_spec_history_is_known_and_the_last_is_current():
    text = (ROOT / "reference" / "SPEC.md").read_text()
    history = text[text.index("\n## Version history"):]
    assert tuple(re.findall(r"^### (\d+\.\d+)$", history, flags=re.M)) == SPEC_VERSIONS
    assert SPEC_VERSION == SPEC_VERSIONS[-1]
    assert f"**SPEC version {SPEC_VERSION}.**" in text[:2000] and "frozen" in text[:2000]


def test_every_introduced_version_is_a_published_one_after_the_first():
    assert all(s.version in SPEC_VERSIONS[1:] for s in spec_versions.INTRODUCED)
    assert spec_versions.introduced_in("input/withdrawn-not-bool") == "1.1"
    assert spec_versions.introduced_in("L1-sampler/canonical/all") == "1.1"
    assert spec_versions.introduced_in("L1/injected/full-mixed/V8/float32") == "1.0"


# --- a device's declaration ---------------------------------------------------------------

def test_an_unknown_version_is_an_error_naming_the_field_and_the_known_versions():
    caps = Capabilities(injected_noise=True, rng="none", max_vocab_size=8, spec_version="2.0")
    with pytest.raises(InvalidInput, match=r"capabilities.spec_version: '2.0' is no SPEC version; the known "
                                           r"versions are 1.0, 1.1"):
        spec_versions.judged_version(caps)
    verdict = profiles.verdict(caps, [], [])
    assert verdict["status"] == "fail" and any("capabilities.spec_version" in r for r in verdict["reasons"])
    with pytest.raises(InvalidInput, match="capabilities.spec_version"):
        Capabilities(injected_noise=True, rng="none", max_vocab_size=8, spec_version=1.0)


def test_a_1_0_device_cannot_declare_what_1_1_added():
    caps = Capabilities(injected_noise=True, rng="none", max_vocab_size=8, spec_version="1.0",
                        withdrawn_drafts=True, max_tree_nodes=32)
    problems = spec_versions.declaration_problems(caps)
    assert [p.split(":")[0] for p in problems] == ["capabilities.withdrawn_drafts", "capabilities.max_tree_nodes"]
    assert profiles.verdict(caps, [], [])["status"] == "fail"


def test_an_undeclared_version_is_judged_against_the_current_one_and_the_verdict_says_so():
    verdict = profiles.verdict(make_cpu_device().capabilities, [], [])
    assert verdict["judged_against"] == verdict["spec_version"] == SPEC_VERSION
    assert verdict["declared_spec_version"] is None and "declares no spec_version" in verdict["spec_version_note"]
    assert verdict["suite_version"]


def test_annotate_marks_checks_newer_than_the_declaration():
    results = [CheckResult("input/withdrawn-not-bool", "input", "fail"), CheckResult("L1/edge/vocab-one", "L1", "pass")]
    old = spec_versions.annotate(results, Capabilities(True, "none", 8, spec_version="1.0"))
    assert old[0].extra == {"since": "1.1", "newer_than_declared": True} and old[1].extra == {}
    assert spec_versions.newer_than_declared(old[0].to_json())
    current = spec_versions.annotate(results, Capabilities(True, "none", 8))
    assert current[0].extra == {"since": "1.1"} and not spec_versions.newer_than_declared(current[0].to_json())


# --- the 1.0 device, declaring 1.0 and then 1.1 ---------------------------------------------

def test_a_1_0_device_declaring_1_0_passes_with_the_newer_checks_apart(monkeypatch):
    checks, verdict = _run(Spec10Device("1.0"), monkeypatch)
    assert verdict["status"] == "partial", verdict["reasons"]   # pass, short of the law groups it did not run
    assert not any("failed" in r or "not_supported" in r for r in verdict["reasons"])
    assert verdict["judged_against"] == verdict["declared_spec_version"] == "1.0"
    assert verdict["newer_checks"]["failing"] == ["L1/trees/edge/sglang-threshold-single-zero"]
    assert verdict["newer_checks"]["count"] >= len(NEW_IN_1_1)
    for name in NEW_IN_1_1 - {"L1/trees/edge/sglang-threshold-single-zero"}:   # never sent
        assert checks[name]["status"] == "not_supported", name
        assert checks[name]["detail"].startswith("new in SPEC 1.1") and "the device declares 1.0" in checks[name]["detail"]
    edge = checks["L1/trees/edge/sglang-threshold-single-zero"]       # a rule on a call 1.0 defined: run, not counted
    assert edge["status"] == "fail" and {k: edge["extra"][k] for k in ("since", "newer_than_declared")} == {"since": "1.1", "newer_than_declared": True}
    assert checks["capabilities/draft_probs"]["status"] == "pass" and "since" not in checks["capabilities/draft_probs"].get("extra", {})


def test_the_same_device_declaring_1_1_fails_the_checks_1_1_added(monkeypatch):
    checks, verdict = _run(Spec10Device("1.1"), monkeypatch)
    assert verdict["status"] == "fail" and verdict["newer_checks"] == {"count": 0, "failing": []}
    for name in NEW_IN_1_1:
        assert checks[name]["status"] == "fail", name
        assert checks[name]["extra"]["since"] == "1.1"


# --- a default the device never chose is not a declaration ------------------------------------

class _UndeclaredLimit:
    """The torch device (it serves 1024 nodes) declaring no ``max_tree_nodes``; ``refuse``: refusing
    beyond SPEC's default instead, as a device with a 64-node kernel would."""

    def __init__(self, refuse: bool):
        self.inner = make_cpu_device()
        self.capabilities = dataclasses.replace(self.inner.capabilities, max_tree_nodes=None)
        self.refuse = refuse

    def verify_tree(self, batch, noise=None):
        if self.refuse:
            from devices.validate import check_tree_call
            check_tree_call(batch, noise, self.capabilities)
        return self.inner.verify_tree(batch, noise)


@pytest.mark.parametrize("refuse", [False, True], ids=["serves-65", "refuses-65"])
def test_an_undeclared_node_limit_holds_the_device_to_serving_the_default_only(refuse):
    device = _UndeclaredLimit(refuse)
    by_name = {r.name: r for r in ROWS}
    past = check_row(device, by_name["tree-max_tree_nodes+1"])
    assert past.status == "pass" and "undeclared" in past.detail
    assert ("refused" in past.detail) == refuse
    assert check_row(device, by_name["tree-max_tree_nodes"]).status == "pass"   # 64 nodes: served


def test_an_all_false_withdrawn_mask_is_served_without_declaring_withdrawn_drafts():
    device = make_cpu_device()
    device.capabilities = dataclasses.replace(device.capabilities, withdrawn_drafts=False)
    by_name = {r.name: r for r in ROWS}
    assert check_row(device, by_name["withdrawn-all-false"]).status == "pass"
    assert check_row(device, by_name["withdrawn_drafts"]).status == "pass"      # a True entry: refused


def test_the_report_and_the_verdict_line_name_the_version_and_the_newer_checks_apart():
    from reports.tables import spec_version_text
    from specsim.commands.conform import verdict_line
    checks = [{"name": "L1/trees/edge/sglang-threshold-single-zero", "layer": "L1", "status": "fail",
               "extra": {"since": "1.1", "newer_than_declared": True}}]
    verdict = profiles.verdict(Spec10Device("1.0").capabilities, checks, ["capabilities"])
    text = spec_version_text({"spec_version": verdict["spec_version"], "verdict": verdict})
    assert text.startswith("1.0 (declared by the device); specsim ")
    assert "1 check(s) new since SPEC 1.0, not counted (1 failing, first: L1/trees/edge/sglang" in text
    assert "new since SPEC 1.0 (not counted): 1 check(s), 1 failing: L1/trees/edge/sglang" in verdict_line(verdict)
    undeclared = profiles.verdict(make_cpu_device().capabilities, [], ["capabilities"])
    assert "note: the device declares no spec_version" in verdict_line(undeclared)


def test_a_tree_served_wrong_beyond_an_undeclared_limit_fails():
    class Wrong(_UndeclaredLimit):
        def verify_tree(self, batch, noise=None):
            out = super().verify_tree(batch, noise)
            if int(batch.num_nodes.max()) > 64:   # beyond SPEC's default: the emitted token off by one
                tokens = np.array(out.output_token_ids, copy=True)
                n = int(out.num_accepted[0])
                tokens[0, n] = (tokens[0, n] + 1) % batch.vocab_size
                out = dataclasses.replace(out, output_token_ids=tokens)
            return out

    past = check_row(Wrong(refuse=False), next(r for r in ROWS if r.name == "tree-max_tree_nodes+1"))
    assert past.status == "fail" and "request 0" in past.detail
