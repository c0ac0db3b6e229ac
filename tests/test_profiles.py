"""SPEC §10: no vacuous PASS. The core profile, the verdict, and the capabilities group both ways."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devices.protocol import Capabilities
from reference import SPEC_VERSION
from specsim.conformance.verdict import profiles
from specsim.conformance.checks.interface.capabilities import ROWS, capabilities_group
from specsim.conformance.run.runner import Context, run_conformance
from specsim.conformance.run.document import document
from tests.fixtures.hollow_devices import HollowDevice, RefusingDevice

ROOT = Path(__file__).resolve().parents[1]
torch_device = pytest.importorskip("devices.torch_device")


class Declaring:
    """The torch device behind other declared capabilities: it serves (or refuses) what it
    serves, whatever this wrapper declares."""

    def __init__(self, inner, **changes):
        self.inner, self.name = inner, f"{inner.name}+{changes}"
        self.capabilities = dataclasses.replace(inner.capabilities, **changes)

    def verify(self, batch, noise=None):
        return self.inner.verify(batch, noise)


def _doc(device, groups):
    return document("test", device, Context(quick=True), run_conformance(device, Context(quick=True), groups), groups)


def test_spec_md_states_the_version_reference_holds():
    head = (ROOT / "reference" / "SPEC.md").read_text()[:2000]
    assert f"**SPEC version {SPEC_VERSION}.**" in head


def test_hollow_device_fails_with_the_missing_core_named():
    v = _doc(HollowDevice(), ["capabilities", "L1-edges", "input-rules"])["verdict"]
    assert v["status"] == "fail" and not v["core_profile"]["met"]
    assert {"draft_probs", "greedy", "top_k", "top_p", "dtype float32"} <= set(v["core_profile"]["missing"])
    assert v["reasons"][0].startswith("core profile not met: the device does not declare draft_probs")
    assert v["spec_version"] == SPEC_VERSION


def test_refusing_device_fails_because_its_declared_modes_are_not_served():
    doc = _doc(RefusingDevice(), ["capabilities", "L1-injected"])
    assert doc["verdict"]["status"] == "fail" and doc["verdict"]["core_profile"]["met"] and not doc["passed"]
    failed = {c["name"] for c in doc["checks"] if c["status"] == "fail"}
    assert {f"capabilities/{r}" for r in ("draft_probs", "greedy", "top_k", "top_p", "dtype-float32")} <= failed
    detail = next(c["detail"] for c in doc["checks"] if c["name"] == "capabilities/greedy")
    assert "declares greedy but raised UnsupportedCall" in detail


def test_refusing_device_fails_even_with_no_capabilities_group():
    """Every L1 case refused inside the declaration (a fail), so the law's evidence is absent though its group ran."""
    doc = _doc(RefusingDevice(), ["L1-injected", "L3-statistical"])
    v = doc["verdict"]
    assert v["status"] == "fail"
    assert any(r.startswith("no check of L1-injected, L3-statistical passed: the core's law evidence is missing")
               for r in v["reasons"]), v["reasons"]
    refused = [c for c in doc["checks"] if c["name"].startswith("L1/injected/") and c["status"] == "fail"]
    assert refused and refused[0]["detail"].startswith("device refused a call inside its declaration (")


def test_cli_prints_the_verdict_and_exits_1_for_the_hollow_device():
    out = subprocess.run([sys.executable, "-m", "specsim.cli", "conform", "--device",
                          "tests.fixtures.hollow_devices:make_hollow", "--groups", "capabilities", "--in-process"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"verdict: FAIL against SPEC {SPEC_VERSION}" in out.stdout
    assert "core profile not met" in out.stdout


@pytest.mark.parametrize("name", ["torch", "hpu", "npu"])
def test_builtin_devices_serve_every_declared_capability_and_refuse_the_rest(name):
    from devices.registry import load
    bad = [f"{r.name}: {r.detail}" for r in capabilities_group(load(name), None) if r.status != "pass"]
    assert not bad, bad


@pytest.mark.parametrize("mode", ["greedy", "point_proposals", "top_k", "top_p", "draft_probs", "injected_noise"])
def test_an_undeclared_mode_raises_unsupported_call_through_the_shared_preamble(mode):
    """``devices.validate.check_call`` refuses every undeclared mode: the group passes both ways."""
    device = torch_device.TorchDevice()
    device.capabilities = dataclasses.replace(device.capabilities, **{mode: False})
    results = {r.name: r for r in capabilities_group(device, None)}
    assert results[f"capabilities/{mode}"].status == "pass", results[f"capabilities/{mode}"].detail
    assert "UnsupportedCall" in results[f"capabilities/{mode}"].detail


def test_the_group_catches_a_device_answering_an_undeclared_mode():
    """A device that declares no point proposals yet answers them silently fails, saying so."""
    device = Declaring(torch_device.TorchDevice(), point_proposals=False)
    result = {r.name: r for r in capabilities_group(device, None)}["capabilities/point_proposals"]
    assert result.status == "fail" and "answered the call instead of raising UnsupportedCall" in result.detail


def test_verdict_rules():
    caps = torch_device.CAPABILITIES
    ok = [{"name": "capabilities/greedy", "status": "pass"}, {"name": "L1/injected/full-mixed/V8/float32/case-0",
                                                             "status": "pass"}]
    assert profiles.verdict(caps, ok, ["capabilities", "L1-injected"])["status"] == "pass"
    assert profiles.verdict(caps, ok[:1], ["capabilities"])["status"] == "partial"
    assert profiles.verdict(caps, ok[:1], ["capabilities", "L1-injected"])["status"] == "fail"
    seeded = dataclasses.replace(caps, injected_noise=False, rng="seeded")  # judged by L3, not L1
    assert profiles.verdict(seeded, ok[:1], ["capabilities", "L1-injected"])["status"] == "partial"
    core_ns = ok + [{"name": "capabilities/top_k", "status": "not_supported", "extra": {"core": True}}]
    v = profiles.verdict(caps, core_ns, ["capabilities", "L1-injected"])
    assert v["status"] == "fail" and "capabilities/top_k" in v["reasons"][0]
    assert profiles.verdict(dataclasses.replace(caps, max_k=4), ok, ["capabilities"])["core_profile"]["missing"] == \
        ["max_k >= 8 (declares 4)"]


def test_every_optional_profile_is_reported():
    v = profiles.verdict(dataclasses.replace(torch_device.CAPABILITIES, dtypes=("float32", "float64")), [], [])
    assert set(v["optional_profiles"]) == {p.name for p in profiles.PROFILES}
    assert v["profiles"]["philox-keyed"]["declared"] and not v["profiles"]["float16"]["declared"]
    assert not v["optional_profiles"]["philox-keyed"]   # declared, but met only once its groups ran and passed


def test_rows_are_uniquely_named():
    names = [r.name for r in ROWS]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[\w+.-]+", n) for n in names)


class ChainZero:
    """Declares the torch device's capabilities; its chain ``verify`` refuses what is undeclared (so the
    capabilities group passes) and answers every call with token 0, nothing accepted; its trees are
    the torch device's own."""

    name = "chain-zero"

    def __init__(self):
        self.inner = torch_device.TorchDevice()
        self.capabilities = self.inner.capabilities

    def verify(self, batch, noise=None):
        import numpy as np
        from devices.validate import check_call
        from devices.protocol import PLACEHOLDER_TOKEN_ID, VerifyOutput
        check_call(batch, noise, self.capabilities)
        out = np.full((batch.batch_size, batch.max_k + 1), PLACEHOLDER_TOKEN_ID, np.int64)
        out[:, 0] = 0
        return VerifyOutput(out, np.zeros(batch.batch_size, np.int64))

    def verify_tree(self, batch, noise=None):
        return self.inner.verify_tree(batch, noise)


def test_tree_checks_are_not_the_chain_steps_law_evidence():
    """Full sizes: right trees and served capabilities, a chain step that always emits token 0: no PASS.
    ``L3/trees/...`` never called ``verify``, so the core's law evidence was not run (PARTIAL)."""
    groups = ["capabilities", "L3-trees"]
    device = ChainZero()
    doc = document("chain-zero", device, Context(), run_conformance(device, Context(), groups), groups)
    assert {c["status"] for c in doc["checks"]} == {"pass"}
    v = doc["verdict"]
    assert v["status"] == "partial", v
    assert any(r.startswith("the core's law evidence was not run") for r in v["reasons"]), v["reasons"]


def test_the_chain_law_evidence_is_named_exactly():
    caps = torch_device.CAPABILITIES
    cap = {"name": "capabilities/greedy", "status": "pass"}
    others = [{"name": n, "status": "pass"} for n in ("L3/trees/rrs-with-replacement/path", "L1/trees/injected/x",
                                                     "L1-sampler/canonical/all", "L3/v16-sampler/r0/pos0",
                                                     "L1/edge/vocab-one", "L1/sizes/batch-B33")]
    ran = ["capabilities", "L1-injected", "L1-keyed", "L3-statistical", "L3-trees", "L1-sampler", "L1-sizes"]
    v = profiles.verdict(caps, [cap] + others, ran)
    assert v["status"] == "fail" and any("the core's law evidence is missing" in r for r in v["reasons"])
    for chain in ("L1/injected/full-mixed/V8/float32", "L1/keyed/full-mixed/V8/float32", "L3/v8-hetero/r0/pos0"):
        assert profiles.verdict(caps, [cap, {"name": chain, "status": "pass"}], ran)["status"] == "pass", chain


def test_a_quick_run_is_never_pass_but_fails_like_any_other():
    caps = torch_device.CAPABILITIES
    ok = [{"name": "capabilities/greedy", "status": "pass"},
          {"name": "L1/injected/full-mixed/V8/float32", "status": "pass"}]
    v = profiles.verdict(caps, ok, ["capabilities", "L1-injected"], quick=True)
    assert v["status"] == "quick" and v["quick"] is True
    assert v["reasons"][0].startswith("a --quick run") and "it would be PASS" in v["reasons"][0]
    assert profiles.verdict(caps, ok[:1], ["capabilities"], quick=True)["status"] == "quick"
    bad = ok + [{"name": "L1/sizes/batch-B33", "status": "fail"}]
    assert profiles.verdict(caps, bad, ["capabilities", "L1-injected"], quick=True)["status"] == "fail"
    doc = _doc(HollowDevice(), ["capabilities"])
    assert doc["quick"] is True and doc["verdict"]["status"] == "fail" and not doc["passed"]


def test_cli_says_a_quick_run_is_no_verdict(tmp_path):
    out = subprocess.run([sys.executable, "-m", "specsim.cli", "conform", "--device", "torch", "--groups",
                          "capabilities", "--quick", "--in-process", "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 5, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"verdict: QUICK against SPEC {SPEC_VERSION} (a --quick run: not a verdict)" in out.stdout
    assert "verdict: PASS" not in out.stdout
    doc = json.loads((tmp_path / "conformance.json").read_text())
    assert doc["quick"] is True and doc["verdict"]["status"] == "quick" and doc["verdict"]["quick"] is True
    md = (tmp_path / "report.md").read_text()
    assert "QUICK" in md and "PASS (SPEC" not in md


def test_the_readme_example_gates_on_the_verdict_of_a_device_declaring_the_core():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Checking a device from Python\n\n```python\n(.*?)```", readme, re.S).group(1)
    assert "verdict_of(" in block and 'verdict["status"] == "pass"' in block and "passed(" not in block
    namespace: dict = {}
    exec(block.split("device = MyDevice()")[0], namespace)  # the imports and the class, not the run
    assert profiles.core_lacking(namespace["MyDevice"].capabilities) == []
