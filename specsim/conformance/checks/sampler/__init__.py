"""The sampler area: L1-sampler (``group``), the sampler's parameters and orders held to the reference, and its
precision at volume (``precision``); L1-keyed-sampler (``keyed``), SPEC §5.2's keyed streams on §12's batches;
L1-16bit (``sixteen_bit``), chains and §12 with 16-bit logits at volume.

It imports ``checks.chain`` (the one arrow between areas), ``stats``, ``cases`` and ``core``.
"""

from specsim.conformance.core.groups import Group

SAMPLER = Group("L1-sampler", "specsim.conformance.checks.sampler.group:sampler_group", statistical=True)
KEYED = Group("L1-keyed-sampler", "specsim.conformance.checks.sampler.keyed:keyed_sampler_group")
SIXTEEN_BIT = Group("L1-16bit", "specsim.conformance.checks.sampler.sixteen_bit:sixteen_bit_group")
