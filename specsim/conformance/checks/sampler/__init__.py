"""The sampler area: L1-sampler, the sampler's parameters and orders held to the reference.

It imports ``checks.chain`` (the one arrow between areas), ``stats``, ``cases`` and ``core``.
"""

from specsim.conformance.core.groups import Group

SAMPLER = Group("L1-sampler", "specsim.conformance.checks.sampler.group:sampler_group", statistical=True)
