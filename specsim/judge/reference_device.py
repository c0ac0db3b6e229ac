"""The reference wrapped as a device, and a device held to the reference at every step.

They live in ``specsim.testing``, not ``devices/``: a device may not import
the reference. ``ReferenceDevice`` *is* the reference, so checking it against
the reference proves only that the harness runs. ``JudgedDevice`` runs a
device and the reference on every call, compares them with SPEC §9's
near-tie allowances (``specsim.judge.compare``) and returns the reference's output, so
a multi-step run (the engine) is judged step by step and stays on the
reference's path whatever near-tie the device flipped.
"""

from __future__ import annotations

from devices.protocol import (SAMPLER_ORDERS, SAMPLER_PARAMETERS, TREE_SCHEMES, Capabilities, Noise, TreeBatch,
                              TreeOutput, VerifyBatch, VerifyOutput)
from specsim.judge.compare import compare, reference_step
from specsim.testing.trees import compare_tree, reference_tree_step


class ReferenceDevice:
    name = "reference"
    capabilities = Capabilities(injected_noise=True, rng="philox", max_vocab_size=1 << 20, max_k=64,
                                sampler=SAMPLER_PARAMETERS, sampler_orders=SAMPLER_ORDERS, tree_schemes=TREE_SCHEMES,
                                withdrawn_drafts=True)

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        result = reference_step(batch, noise)
        return VerifyOutput(result.output_token_ids, result.num_accepted)

    def verify_tree(self, batch: TreeBatch, noise: Noise | None = None) -> TreeOutput:
        want = reference_tree_step(batch, noise)
        return TreeOutput(want.output_token_ids, want.num_accepted, want.accepted_nodes)


class JudgedDevice:
    """``device`` (declaring ``rng="philox"`` or taking injected noise) checked against the reference
    on every call; an ``AssertionError`` names the step's differences. ``waivers`` counts the flips."""

    def __init__(self, device):
        self.device, self.name, self.capabilities = device, f"judged {device.name}", device.capabilities
        self.waivers = 0

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        want = reference_step(batch, noise)
        result = compare(batch, self.device.verify(batch, noise), want)
        assert result.ok, f"{self.device.name} differs from the reference:\n{result.summary()}"
        self.waivers += result.waivers
        return VerifyOutput(want.output_token_ids, want.num_accepted)

    def verify_tree(self, batch: TreeBatch, noise: Noise | None = None) -> TreeOutput:
        """SPEC §11 compares exactly (no waivers for trees, docs/trees.md)."""
        want = reference_tree_step(batch, noise)
        problems = compare_tree(self.device.verify_tree(batch, noise), want)
        assert not problems, f"{self.device.name} differs from the reference tree step:\n" + "\n".join(problems[:5])
        return TreeOutput(want.output_token_ids, want.num_accepted, want.accepted_nodes)


def make_device() -> ReferenceDevice:
    return ReferenceDevice()
