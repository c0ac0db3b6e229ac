"""Every check group, in run order: one line each, the declarations living in their areas."""

from __future__ import annotations

from specsim.conformance.checks import chain, declared, interface, sampler, trees
from specsim.conformance.core.groups import Group

RUN_ORDER: tuple[Group, ...] = (
    chain.INJECTED,
    chain.KEYED,
    chain.EDGES,
    chain.SIZES,
    sampler.SAMPLER,
    sampler.KEYED,
    trees.L1,
    trees.L2,
    chain.VOLUME,
    sampler.SIXTEEN_BIT,
    chain.LONG,
    chain.OFFSETS,
    chain.RNG,
    chain.RNG_SIZES,
    declared.EXACT,
    interface.INPUT_RULES,
    chain.STATISTICAL,
    trees.STATISTICAL,
    declared.LAWS,
    interface.CAPABILITIES,
)

GROUPS: dict[str, str] = {g.name: g.run for g in RUN_ORDER}
"""Every group, in run order: name → ``"module:function"``. A group whose module is absent from this checkout
is an ``error`` when run (a check that vanishes must say so), never skipped."""

DECLARED: dict[str, Group] = {g.name: g for g in RUN_ORDER}
"""Every group's declaration by name."""
