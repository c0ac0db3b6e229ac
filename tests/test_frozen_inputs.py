"""SPEC §1's read-only inputs: every call the suite makes hands the device read-only arrays and
fingerprints them before and after; a device that writes to its inputs fails, naming the arrays and
the rule."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from devices.protocol import Noise, SamplerParams
from specsim.conformance.run import runner
from specsim.conformance.core.calls import READ_ONLY_RULE, MutatedInput, ask, fingerprint, frozen_call, read_only
from specsim.conformance.run.runner import Context, run_group
from specsim.testing.batches import BatchSpec, random_batch, random_noise

torch = pytest.importorskip("torch")
from devices.registry import load  # noqa: E402


class ClampsInPlace:
    """The torch device behind a front end that clamps ``top_k`` and ``temperature`` in place, as a
    kernel's launcher can: through tensors sharing the arrays' memory, which numpy cannot stop."""

    def __init__(self, inner, top_k_max: int = 8, temperature_max: float = 1.0):
        self.inner, self.name, self.capabilities = inner, "clamps-in-place", inner.capabilities
        self.top_k_max, self.temperature_max = top_k_max, temperature_max

    def verify(self, batch, noise=None):
        torch.from_numpy(batch.top_k).clamp_(max=self.top_k_max)
        torch.from_numpy(batch.temperature).clamp_(max=self.temperature_max)
        return self.inner.verify(batch, noise)


class SharesMemory:
    """A correct device that wraps the arrays it is given in tensors without copying (``torch.from_numpy``)."""

    def __init__(self, inner):
        self.inner, self.name, self.capabilities = inner, "shares-memory", inner.capabilities

    def verify(self, batch, noise=None):
        logits = batch.target_logits
        if logits.dtype.name == "bfloat16":   # torch.from_numpy knows no ml_dtypes bfloat16: share its bits
            logits = logits.view(np.int16)
        torch.from_numpy(logits).sum()
        return self.inner.verify(batch, noise)


@pytest.fixture(scope="module")
def device():
    return load("torch")


def _batch(seed: int = 0):
    rng = np.random.default_rng(seed)
    batch = random_batch(rng, BatchSpec(batch=12, vocab_size=64, top_k_fraction=1.0))
    return batch, random_noise(rng, batch)


def test_a_device_clamping_top_k_and_temperature_in_place_fails_naming_the_rule(device):
    results = run_group("L1-injected", ClampsInPlace(device), Context(quick=True))
    failed = [r for r in results if r.status == "fail"]
    assert failed and not [r for r in results if r.status == "error"]
    assert all(READ_ONLY_RULE in r.detail for r in failed)
    named = " ".join(r.detail for r in failed)
    assert "batch.top_k" in named and "batch.temperature" in named


def test_the_mutated_fields_are_named_and_the_callers_arrays_stay_writable(device):
    batch, noise = _batch()
    with pytest.raises(MutatedInput) as caught:
        ask(ClampsInPlace(device), batch, noise)
    assert caught.value.fields == ("batch.temperature", "batch.top_k")
    assert batch.top_k.flags.writeable and batch.temperature.flags.writeable   # the suite's own arrays


def test_a_write_numpy_refuses_is_a_mutation_too(device):
    class WritesThroughNumpy:
        name, capabilities = "writes", device.capabilities

        def verify(self, batch, noise=None):
            batch.top_k[:] = 0
            return device.verify(batch, noise)

    batch, noise = _batch()
    with pytest.raises(MutatedInput, match="read-only"):
        ask(WritesThroughNumpy(), batch, noise)
    assert batch.top_k.any()


def test_noise_and_sampler_parameters_are_fingerprinted_too():
    bias = np.zeros((2, 4))
    inputs = {"batch": SamplerParams(logit_bias=bias, prompt_token_ids=(np.array([1, 2]), np.array([3]))),
              "noise": Noise(np.array([0.5]), np.ones((2, 4)))}

    def writes(batch, noise):
        torch.from_numpy(noise.uniforms).fill_(0.25)
        torch.from_numpy(batch.prompt_token_ids[1]).fill_(0)
        return "out"

    with pytest.raises(MutatedInput) as caught:
        frozen_call(writes, inputs)
    assert caught.value.fields == ("batch.prompt_token_ids", "noise.uniforms")   # a per-request list: one entry
    assert set(fingerprint(inputs)) >= {"batch.logit_bias", "noise.exponentials"}
    frozen = read_only(inputs["batch"])
    assert not frozen.logit_bias.flags.writeable and not frozen.prompt_token_ids[0].flags.writeable


def test_a_correct_device_sharing_memory_passes_without_warnings(device):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        results = run_group("L1-injected", SharesMemory(device), Context(quick=True))
    assert {r.status for r in results} <= {"pass", "not_supported"}
    assert not [w for w in seen if "not writable" in str(w.message)]


def _escaping_group(device, ctx):
    batch, noise = _batch()
    ask(device, batch, noise)          # outside ``call``: the write escapes the group
    return []


def test_a_write_that_escapes_a_group_is_its_mutated_input_failure(device, monkeypatch):
    monkeypatch.setitem(runner.GROUPS, "L1-escape", f"{__name__}:_escaping_group")
    (result,) = run_group("L1-escape", ClampsInPlace(device), Context(quick=True))
    assert (result.name, result.status) == ("L1-escape/mutated-input", "fail")
    assert READ_ONLY_RULE in result.detail


def test_the_input_rules_and_capabilities_calls_are_frozen_too(device):
    for group in ("input-rules", "capabilities"):
        failed = [r for r in run_group(group, ClampsInPlace(device, top_k_max=0, temperature_max=0.0),
                                       Context(quick=True)) if r.status == "fail"]
        assert any(READ_ONLY_RULE in r.detail for r in failed), group


def test_a_devices_own_warning_is_still_shown_once():
    def warns(batch, noise):
        warnings.warn("the device's own warning")
        return None

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        for _ in range(3):
            frozen_call(warns, {"batch": np.zeros(2), "noise": None})
    assert [str(w.message) for w in seen] == ["the device's own warning"]


def test_a_shared_read_only_array_is_checked_at_every_call():
    """The suite's shared tiles are read-only to numpy; their fingerprint is remembered between calls, and
    every call's write is still caught, the first and any later one."""
    tile = np.arange(6.0)
    tile.flags.writeable = False

    def reads(batch, noise):
        return float(batch.sum())

    def writes(batch, noise):
        torch.from_numpy(batch).add_(1.0)

    for invoke, caught in ((reads, False), (writes, True), (reads, False), (writes, True)):
        try:
            frozen_call(invoke, {"batch": tile, "noise": None})
        except MutatedInput as e:
            assert caught and e.fields == ("batch",)
        else:
            assert not caught
