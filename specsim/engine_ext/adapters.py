"""Device adapters for running fp32-only devices (the ``npu`` device) inside the engine.

The toy engine's target logits are float64; an Ascend model runner hands its
sampler fp32 (or bf16) logits. ``Float32Host`` casts on the host — target
logits and draft probs to float32 — and then calls the device unchanged, so
the device still validates and verifies the batch as given to it.

>>> from devices.registry import load
>>> Float32Host(load("npu")).name
'npu+fp32-host'
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import Noise, VerifyBatch, VerifyOutput


class Float32Host:
    """Wraps ``device``; ``verify`` casts ``target_logits``/``draft_probs`` to float32 first."""

    def __init__(self, device):
        self.device = device
        self.name = f"{device.name}+fp32-host"
        self.capabilities = replace(device.capabilities, dtypes=("float32", "float64"))

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        cast = replace(batch, target_logits=batch.target_logits.astype(np.float32),
                       draft_probs=None if batch.draft_probs is None else batch.draft_probs.astype(np.float32))
        return self.device.verify(cast, noise)


__all__ = ["Float32Host"]
