"""The check groups, by specification area: ``chain`` (L1 exact, sizes, volume, long runs, L2 RNG contracts,
L3 statistics), ``sampler`` (L1-sampler), ``trees`` (L1/L2/L3 trees), ``interface`` (input rules,
capabilities) and ``declared`` (L1/L3-declared limits).

Areas import ``stats``, ``cases`` and ``core``, and never each other, except ``sampler`` → ``chain``.
"""
