"""The sampler area: L1-sampler (``group``), the sampler's parameters and orders held to the reference, and its
precision at volume (``precision``); L1-keyed-sampler (``keyed``), SPEC §5.2's keyed streams on §12's batches.

It imports ``checks.chain`` (the one arrow between areas), ``stats``, ``cases`` and ``core``.
"""

from specsim.conformance.core.groups import Group

SAMPLER = Group("L1-sampler", "specsim.conformance.checks.sampler.group:sampler_group", statistical=True)
KEYED = Group("L1-keyed-sampler", "specsim.conformance.checks.sampler.keyed:keyed_sampler_group")
