"""A device seen as a black box: the view ``specsim mutants --black-box`` and ``specsim calibrate`` judge.

Without injected noise the exact layers cannot place coins, so what remains is the device's own RNG
under the seeded contract (L2) and the statistical laws (L3, edge laws, tree pattern laws): the
evidence an engine's sampler offers when it cannot take noise from outside.
"""

from __future__ import annotations

from dataclasses import replace

from devices.protocol import UnsupportedCall


class BlackBox:
    """Wraps a device, declaring no injected noise and a ``"seeded"`` RNG — and keeping to it: given noise,
    it raises ``UnsupportedCall`` as a device without injected noise must (answering instead, every black-box
    twin that survived the other groups was "killed" by ``capabilities/injected_noise``, a kill of the
    wrapper, not of the mutant)."""

    def __init__(self, device):
        self.inner = device
        self.name = f"{device.name} (black box)"
        self.capabilities = replace(device.capabilities, injected_noise=False, rng="seeded")
        if not callable(getattr(device, "verify_tree", None)):   # a wrapper of chains only: no trees to ask
            self.capabilities = replace(self.capabilities, tree_schemes=())

    def verify(self, batch, noise=None):
        if noise is not None:
            raise UnsupportedCall("injected noise (black box: the device draws its own)")
        return self.inner.verify(batch, noise)

    def verify_tree(self, batch, noise=None):
        if noise is not None:
            raise UnsupportedCall("injected noise (black box: the device draws its own)")
        return self.inner.verify_tree(batch, noise)
