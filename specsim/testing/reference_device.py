"""The reference wrapped as a device — for testing the harness itself.

It lives in ``specsim.testing``, not ``devices/``: a device may not import
the reference, and this one *is* the reference, so checking it against the
reference proves only that the harness runs. Slow (a Python loop per
request); small batches only.
"""

from __future__ import annotations

from devices.protocol import Capabilities, Noise, VerifyBatch, VerifyOutput
from specsim.testing.compare import reference_step


class ReferenceDevice:
    name = "reference"
    capabilities = Capabilities(injected_noise=True, rng="philox", max_vocab_size=1 << 20, max_k=64)

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        result = reference_step(batch, noise)
        return VerifyOutput(result.output_token_ids, result.num_accepted)


def make_device() -> ReferenceDevice:
    return ReferenceDevice()
