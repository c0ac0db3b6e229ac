"""SPEC §6's 16-bit logits: float16 and bfloat16 (ml_dtypes) target logits pair with float32 draft
probabilities; the reference and every device refuse other pairs by name; a device that does not
declare a 16-bit dtype raises UnsupportedCall (the Triton device declares both; its interpreter tests
run them against the reference)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from devices.validate import validate
from devices.protocol import Capabilities, InvalidInput, UnsupportedCall
from reference.validate import InvalidInput as ReferenceInvalidInput
from specsim.testing.batches import BatchSpec, numpy_dtype, random_batch
from specsim.judge.compare import reference_step

LOW = ["bfloat16", "float16"]


def _batch(dtype: str, draft_probs: bool = True):
    return random_batch(np.random.default_rng(0), BatchSpec(batch=3, vocab_size=40, dtype=dtype,
                                                            draft_probs=draft_probs))


@pytest.mark.parametrize("dtype", LOW)
def test_sixteen_bit_logits_go_with_float32_draft_probs(dtype):
    batch = _batch(dtype)
    assert batch.target_logits.dtype == numpy_dtype(dtype) and batch.draft_probs.dtype == np.float32
    validate(batch)
    step = reference_step(batch, None)  # computes from the given values, up-cast exactly
    want = reference_step(replace(batch, target_logits=batch.target_logits.astype(np.float64),
                                  draft_probs=batch.draft_probs.astype(np.float64)), None)
    assert np.array_equal(step.output_token_ids, want.output_token_ids)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("probs_dtype", ["same", "float64"])
def test_other_draft_dtypes_are_refused_by_name(dtype, probs_dtype):
    batch = _batch(dtype)
    wrong = numpy_dtype(dtype) if probs_dtype == "same" else np.dtype(np.float64)
    bad = replace(batch, draft_probs=batch.draft_probs.astype(wrong))
    with pytest.raises(InvalidInput, match=r"^draft_probs: dtype must be"):
        validate(bad)
    with pytest.raises(ReferenceInvalidInput, match=r"^draft_probs: dtype must be"):
        reference_step(bad, None)


def test_a_device_without_sixteen_bit_logits_raises_unsupported_call():
    from devices.registry import load
    batch = _batch("bfloat16")
    assert "bfloat16" not in load("npu").capabilities.dtypes
    with pytest.raises(UnsupportedCall, match="bfloat16"):
        load("npu").verify(batch)


def test_capabilities_take_the_four_dtypes_and_nothing_else():
    Capabilities(injected_noise=True, rng="none", max_vocab_size=8, dtypes=("bfloat16", "float16", "float32"))
    with pytest.raises(InvalidInput, match="capabilities.dtypes"):
        Capabilities(injected_noise=True, rng="none", max_vocab_size=8, dtypes=("int8",))
