"""The L1 volume check (SPEC §9): a correct float32 device passes with its figure; devices
computing below their declared float32 — bf16 logits, an fp16 softmax — fail with theirs."""

from __future__ import annotations

import time

import pytest
import torch

from devices.torch_device import TorchDevice
from specsim.conformance.checks.chain import volume
from tests.fixtures.low_precision_device import RoundedLogits, make_fp16_softmax

REQUESTS = 5 * volume.CHUNK   # ~45k decisions: a defect at ≥ 1.5e-4 per decision shows with probability ≥ 0.999


class Slow(TorchDevice):
    def verify(self, batch, noise=None):
        time.sleep(0.2)
        return super().verify(batch, noise)


def test_a_correct_float32_device_passes_with_its_figure():
    result = volume.volume_check(TorchDevice("cpu"), seed=0, requests=REQUESTS, budget_s=None)
    assert result.status == "pass", result.detail
    extra = result.extra
    assert extra["requests"] == REQUESTS and extra["beyond"] == 0 and extra["near_tie_allowances"] <= 2
    assert extra["decisions"] > 2 * REQUESTS and 0 < extra["tv_bound"] < 4e-4
    assert "per million differ beyond the float32 margin" in result.detail


@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_rounded_logits_below_the_declared_float32_fail(low):
    result = volume.volume_check(RoundedLogits(low), seed=0, requests=REQUESTS, budget_s=None)
    assert result.status == "fail" and result.extra["beyond"] > 0, result.detail
    assert "below its declared precision" in result.detail


def test_an_fp16_softmax_fails():
    """A reduced-precision intermediate (the zoo's mutant edits the same function)."""
    result = volume.volume_check(make_fp16_softmax(), seed=0, requests=REQUESTS, budget_s=None)
    assert result.status == "fail" and result.extra["beyond_per_million"] > 30, result.detail


def test_a_slow_device_runs_what_fits_its_budget_and_says_so():
    result = volume.volume_check(Slow("cpu"), seed=0, requests=5 * volume.CHUNK, budget_s=0.5)
    assert result.status == "pass" and result.extra["requests"] < 5 * volume.CHUNK
    assert "volume reduced to" in result.detail


class SlowFirstCall(TorchDevice):
    """A kernel compiled on its first call: one slow call, then the device's own rate."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def verify(self, batch, noise=None):
        self.calls += 1
        if self.calls == 1:
            time.sleep(1.0)
        return super().verify(batch, noise)


def test_a_first_call_that_pays_a_compilation_does_not_cut_the_volume():
    """Projected from the first call (1 s for 512 requests) the volume would take 40 s; the second call's rate
    is the device's, and the whole volume fits the budget."""
    result = volume.volume_check(SlowFirstCall("cpu"), seed=0, requests=REQUESTS, budget_s=8.0)
    assert result.status == "pass" and result.extra["requests"] == REQUESTS, result.detail
    assert "volume reduced to" not in result.detail
