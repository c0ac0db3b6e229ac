"""The chain area: L1-injected, L1-keyed, L1-edges, L1-sizes, L1-volume, L1-long, L2-rng, L2-sizes and
L3-statistical.

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""
