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
from specsim.conformance import profiles
from specsim.conformance.capabilities import ROWS, capabilities_group
from specsim.conformance.runner import Context, document, run_conformance
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
    """Every L1 case not_supported: the law's evidence is absent though its group ran."""
    v = _doc(RefusingDevice(), ["L1-injected", "L3-statistical"])["verdict"]
    assert v["status"] == "fail"
    assert any(r.startswith("no check of L1-injected, L3-statistical passed: the core's law evidence is missing")
               for r in v["reasons"]), v["reasons"]


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
    """``devices._validate.check_call`` refuses every undeclared mode: the group passes both ways."""
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
    v = profiles.verdict(torch_device.CAPABILITIES, [], [])
    assert set(v["optional_profiles"]) == {p.name for p in profiles.PROFILES}
    assert v["optional_profiles"]["philox-keyed"] and not v["optional_profiles"]["float16"]


def test_rows_are_uniquely_named():
    names = [r.name for r in ROWS]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[\w+.-]+", n) for n in names)
