"""L1-long: one device instance, hundreds of calls in one process; a device that goes wrong after its
first hundred calls fails, and the check names the call, with injected noise, keyed Philox draws or
its own seeded randomness."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from devices.protocol import UnsupportedCall, VerifyOutput
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.checks.chain.long_run import QUICK_CALLS, noise_modes, plan
from specsim.conformance.run.runner import GROUPS, Context, run_group

torch = pytest.importorskip("torch")
from devices.registry import load  # noqa: E402

QUICK = Context(quick=True)


class WrongAfter:
    """Correct for its first ``after`` calls in this process, then every emitted token moved by one (as
    a kernel reading a reused buffer would)."""

    def __init__(self, inner, after: int = 100):
        self.inner, self.after, self.calls = inner, after, 0
        self.name, self.capabilities = f"{inner.name} (wrong after {after} calls)", inner.capabilities

    def verify(self, batch, noise=None):
        out = self.inner.verify(batch, noise)
        self.calls += 1
        if self.calls <= self.after:
            return out
        ids, accepted = np.array(out.output_token_ids), np.asarray(out.num_accepted)
        rows = np.arange(len(accepted))
        ids[rows, accepted] = (ids[rows, accepted] + 1) % batch.vocab_size
        return VerifyOutput(ids, out.num_accepted)


class KeyedOnly:
    """The torch device declaring its Philox streams and no injected noise."""

    def __init__(self, inner):
        self.inner, self.name = inner, f"{inner.name} (keyed only)"
        self.capabilities = replace(inner.capabilities, injected_noise=False)

    def verify(self, batch, noise=None):
        if noise is not None:
            raise UnsupportedCall("injected noise (this device draws its own)")
        return self.inner.verify(batch, noise)


@pytest.fixture(scope="module")
def torch_device():
    return load("torch")


def _first_wrong_call(results) -> int:
    calls = [int(m.group(1)) for r in results if r.status == "fail"
             for m in [re.search(r"then wrong at call (\d+)", r.detail)] if m]
    assert calls, [(r.name, r.status, r.detail[:200]) for r in results]
    return min(calls)


def test_the_group_is_registered_and_quick_goes_past_a_hundred_calls(torch_device):
    assert GROUPS["L1-long"] == "specsim.conformance.checks.chain.long_run:long_run_group"
    assert QUICK_CALLS > 100
    calls = plan(torch_device.capabilities, 0, QUICK_CALLS)
    assert len(calls) == QUICK_CALLS and calls == plan(torch_device.capabilities, 0, QUICK_CALLS)
    assert max(c.batch for c in calls) > 64 and max(c.vocab_size for c in calls) > 32768
    assert {c.mode for c in calls} == {"greedy", "temperature", "top-k", "top-p", "mixed"}
    assert {c.point for c in calls} == {True, False} and any(c.withdrawn for c in calls)


@pytest.mark.parametrize("wrap", [lambda d: d, KeyedOnly, BlackBox], ids=["injected", "keyed", "device-rng"])
def test_a_device_wrong_after_its_first_hundred_calls_fails_naming_call_101(torch_device, wrap):
    device = WrongAfter(wrap(torch_device))
    results = run_group("L1-long", device, QUICK)
    assert _first_wrong_call(results) == 101
    assert not [r for r in results if r.status == "error"]
    assert {r.extra["scope"]["mode"] for r in results} == set(noise_modes(device.capabilities))


@pytest.mark.parametrize("wrap", [lambda d: d, BlackBox], ids=["injected", "device-rng"])
def test_the_correct_torch_device_passes_with_its_scope_stated(torch_device, wrap):
    device = wrap(torch_device)
    results = run_group("L1-long", device, QUICK)
    assert [(r.name, r.detail) for r in results if r.status != "pass"] == []
    scopes = [r.extra["scope"] for r in results]
    assert sum(s["calls"] for s in scopes) == QUICK_CALLS
    assert max(s["V"] for s in scopes) > 32768 and max(s["batch"] for s in scopes) > 64
    if not device.capabilities.injected_noise:
        assert "L1/long/device-rng/replay" in {r.name for r in results}

