"""The chain area: L1-injected, L1-keyed, L1-edges, L1-sizes, L1-volume, L1-long, L1-offsets, L2-rng, L2-sizes
and L3-statistical.

``placed`` moves injected noise beside the decisions it drives (coins by their ratios, races by their ties), for
the checks that must see a device's arithmetic (``checks.sampler.sixteen_bit``).

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""

from specsim.conformance.core.groups import Group

INJECTED = Group("L1-injected", "specsim.conformance.checks.chain.exact:injected_noise_group")
KEYED = Group("L1-keyed", "specsim.conformance.checks.chain.exact:keyed_noise_group")
EDGES = Group("L1-edges", "specsim.conformance.checks.chain.exact:edge_group", statistical=True)
SIZES = Group("L1-sizes", "specsim.conformance.checks.chain.sizes:sizes_group")
VOLUME = Group("L1-volume", "specsim.conformance.checks.chain.volume:volume_group")
# the long run makes 3000 calls: more than 3 min for the Triton device, whose calls are host-bound at small sizes
LONG = Group("L1-long", "specsim.conformance.checks.chain.long_run:long_run_group", timeout_s=1800.0)
# a call past 2^32 elements moves tens of GiB: minutes on a GPU host (1 GiB per call by default: instant)
OFFSETS = Group("L1-offsets", "specsim.conformance.checks.chain.offsets:offsets_group", timeout_s=1200.0)
RNG = Group("L2-rng", "specsim.conformance.checks.chain.rng:rng_group")
RNG_SIZES = Group("L2-sizes", "specsim.conformance.checks.chain.sizes:rng_sizes_group")
# ~10⁶ steps on CPU: about 6 minutes on a loaded 2-core CPU at the default budget
STATISTICAL = Group("L3-statistical", "specsim.conformance.checks.chain.statistical:statistical_group", timeout_s=3600.0, statistical=True)
