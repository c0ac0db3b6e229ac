"""The trees area: L1-trees (``l1``, with the constructed patterns of ``patterns`` and the engine sizes of ``sizes``),
L2-trees (``l2``) and L3-trees (``statistical``).

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""

from specsim.conformance.core.groups import Group

L1 = Group("L1-trees", "specsim.conformance.checks.trees.l1:tree_l1_group", statistical=True)   # its pattern laws
L2 = Group("L2-trees", "specsim.conformance.checks.trees.l2:tree_l2_group")
STATISTICAL = Group("L3-trees", "specsim.conformance.checks.trees.statistical:tree_statistical_group", statistical=True)
