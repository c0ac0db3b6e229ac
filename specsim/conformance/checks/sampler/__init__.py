"""The sampler area: L1-sampler (``group``), the sampler's parameters and orders held to the reference, and its
precision at volume (``precision``).

It imports ``checks.chain`` (the one arrow between areas), ``stats``, ``cases`` and ``core``.
"""

from specsim.conformance.core.groups import Group

SAMPLER = Group("L1-sampler", "specsim.conformance.checks.sampler.group:sampler_group", statistical=True)
