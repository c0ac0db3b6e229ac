"""specsim.mutants.source: every anchor still matches once; copies never touch the installed modules."""

from __future__ import annotations

import numpy as np
import pytest

import devices.torch_sampling
from specsim.mutants.source import Edit, SourceMutant, StaleAnchor
from specsim.mutants.zoo import SOURCE_MUTANTS


@pytest.mark.parametrize("mutant", SOURCE_MUTANTS, ids=lambda m: m.id)
def test_every_anchor_matches_exactly_once(mutant):
    """A refactor of a device module must update the mutants that edit it (the message names which)."""
    text = mutant.mutated_source()
    compile(text, f"<mutant {mutant.id}>", "exec")  # the edit leaves valid Python
    assert text != mutant.source_path().read_text()


def test_stale_anchor_names_the_mutant_and_module():
    m = SourceMutant("twice", "", "", "devices.torch_sampling", (Edit("torch", "torch"),))
    with pytest.raises(StaleAnchor, match=r"mutant 'twice': anchor 'torch' occurs \d+ times in devices/torch_sampling.py"):
        m.mutated_source()


def test_mutated_copy_leaves_the_installed_modules_alone():
    import sys

    from devices import torch_device
    original = (sys.modules["devices.torch_sampling"], devices.torch_sampling.coin_accepts, torch_device.ts)
    mutant = SourceMutant("always-accept", "", "", "devices.torch_sampling",
                          (Edit("return uniforms < t_x", "return uniforms < 2 + t_x"),))
    device = mutant.make()
    assert (sys.modules["devices.torch_sampling"], devices.torch_sampling.coin_accepts, torch_device.ts) == original
    assert device.inner.capabilities == torch_device.CAPABILITIES and device.name == "mutant:always-accept"

    from devices.protocol import Noise, VerifyBatch
    batch = VerifyBatch(num_draft_tokens=np.array([2]), draft_token_ids=np.array([0, 0]), draft_probs=None,
                        target_logits=np.log(np.array([[0.1, 0.9]] * 3)), temperature=np.array([1.0]),
                        top_k=np.array([0]), top_p=np.array([1.0]))
    noise = Noise(np.array([0.5, 0.5]), np.ones((1, 2)))
    assert device.verify(batch, noise).num_accepted.tolist() == [2]  # the mutant accepts every draft
    assert torch_device.make_cpu_device().verify(batch, noise).num_accepted.tolist() == [0]  # the original does not
