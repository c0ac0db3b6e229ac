"""SPEC §6 (§11.6 for trees): the reference and the device refuse every bad input with an error naming
the argument."""

from __future__ import annotations

import pytest

from devices.protocol import UnsupportedCall
from specsim.conformance.core.calls import missing
from specsim.testing.bad_inputs import BAD_INPUTS, NO_NOISE_WITHOUT_SEEDS, TREE_BAD_INPUTS, TREE_NO_NOISE_WITHOUT_SEEDS
from specsim.judge.compare import reference_step

CASES = BAD_INPUTS + [NO_NOISE_WITHOUT_SEEDS]


@pytest.mark.parametrize("bad", CASES, ids=[b.rule.replace(" ", "-") for b in CASES])
def test_reference_refuses_bad_input_by_name(bad):
    batch, noise = bad.make()
    with pytest.raises(ValueError, match=bad.argument):
        reference_step(batch, noise)


@pytest.mark.parametrize("bad", CASES, ids=[b.rule.replace(" ", "-") for b in CASES])
def test_device_refuses_bad_input_by_name(device_under_test, bad):
    batch, noise = bad.make()
    caps = device_under_test.capabilities
    if noise is not None and not caps.injected_noise:
        if bad.argument in ("uniforms", "exponentials"):
            pytest.skip("device does not take injected noise")
        noise = None
    if noise is None and caps.rng == "none":
        pytest.skip("device draws no randomness of its own")
    if missing(caps, bad.needs):   # a mode the device cannot serve at all may be refused as such (SPEC §6, §10)
        with pytest.raises((ValueError, UnsupportedCall)) as refused:
            device_under_test.verify(batch, noise)
        assert isinstance(refused.value, UnsupportedCall) or bad.argument in str(refused.value), refused.value
        return
    with pytest.raises(ValueError, match=bad.argument):
        device_under_test.verify(batch, noise)


def test_valid_input_is_accepted(device_under_test):
    """The bad inputs are bad for the stated reason only: the base batch is valid.

    It is sent in a dtype the device declares (float64 where it can): a device that computes in float32
    (vLLM, FlashInfer, the NPU) refuses float64 logits with ``UnsupportedCall``, as it must (SPEC §10),
    and that refusal says nothing about the batch."""
    from specsim.testing.bad_inputs import good_batch
    from specsim.testing.batches import numpy_dtype
    from specsim.testing.strategies import as_dtype
    caps = device_under_test.capabilities
    batch, noise = good_batch()
    reference_step(batch, noise)
    dtype = next(d for d in ("float64", "float32", *caps.dtypes) if d in caps.dtypes)
    device_under_test.verify(as_dtype(batch, numpy_dtype(dtype)), noise if caps.injected_noise else None)


TREE_CASES = TREE_BAD_INPUTS + [TREE_NO_NOISE_WITHOUT_SEEDS]


@pytest.mark.parametrize("bad", TREE_CASES, ids=[b.rule.replace(" ", "-") for b in TREE_CASES])
def test_reference_refuses_bad_tree_input_by_name(bad):
    """SPEC §11.6: the reference's tree step refuses each rule, naming the argument."""
    from specsim.testing.trees import reference_tree_step
    batch, noise = bad.make()
    with pytest.raises(ValueError, match=bad.argument):
        reference_tree_step(batch, noise)


@pytest.mark.parametrize("bad", TREE_CASES, ids=[b.rule.replace(" ", "-") for b in TREE_CASES])
def test_device_refuses_bad_tree_input_by_name(device_under_test, bad):
    caps = device_under_test.capabilities
    if not caps.tree_schemes or not hasattr(device_under_test, "verify_tree"):
        pytest.skip("device declares no tree_schemes (SPEC §11)")
    batch, noise = bad.make()
    if noise is not None and not caps.injected_noise:
        if bad.argument in ("uniforms", "exponentials"):
            pytest.skip("device does not take injected noise")
        noise = None
    if noise is None and caps.rng == "none":
        pytest.skip("device draws no randomness of its own")
    with pytest.raises(ValueError, match=bad.argument):
        device_under_test.verify_tree(batch, noise)
