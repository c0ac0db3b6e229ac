"""The declared area: L1-declared and L3-declared, a device held to the limits it declares.

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""

from specsim.conformance.core.groups import Group

# both scale with the declaration: a device declaring V up to 2³⁰ is checked at 38,347,922 ids, where one call
# fills the default 1 GiB (L1-declared took 5 min 38 s there on an NVIDIA H200, L3-declared more than 6 min)
EXACT = Group("L1-declared", "specsim.conformance.checks.declared.group:declared_exact_group", timeout_s=3600.0)
LAWS = Group("L3-declared", "specsim.conformance.checks.declared.group:declared_law_group", timeout_s=3600.0, statistical=True)
