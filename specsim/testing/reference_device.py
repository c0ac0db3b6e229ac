"""The reference wrapped as a device, and a device held to the reference at every step.

They live in ``specsim.testing``, not ``devices/``: a device may not import
the reference. ``ReferenceDevice`` *is* the reference, so checking it against
the reference proves only that the harness runs. ``JudgedDevice`` runs a
device and the reference on every call, compares them with SPEC §9's
waivers (``specsim.testing.compare``) and returns the reference's output, so
a multi-step run (the engine) is judged step by step and stays on the
reference's path whatever near-tie the device flipped.
"""

from __future__ import annotations

from devices.protocol import SAMPLER_ORDERS, SAMPLER_PARAMETERS, Capabilities, Noise, VerifyBatch, VerifyOutput
from specsim.testing.compare import compare, reference_step


class ReferenceDevice:
    name = "reference"
    capabilities = Capabilities(injected_noise=True, rng="philox", max_vocab_size=1 << 20, max_k=64,
                                sampler=SAMPLER_PARAMETERS, sampler_orders=SAMPLER_ORDERS)

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        result = reference_step(batch, noise)
        return VerifyOutput(result.output_token_ids, result.num_accepted)


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


def make_device() -> ReferenceDevice:
    return ReferenceDevice()
