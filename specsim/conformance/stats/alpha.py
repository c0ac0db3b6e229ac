"""The run's false-fail budget, split: one family, ``alpha_family`` shared evenly (Bonferroni) by every statistical
test of every group that spends α (``GROUPS``), each run at its share / ``SAFETY``."""

from __future__ import annotations

import math

from specsim.judge import stats

SAFETY = stats.SAFETY
"""Every test runs at its share / SAFETY (``stats.SAFETY``)."""

L3, TREES, EDGES_GROUP, SAMPLER, PATTERNS, DECLARED = ("L3-statistical", "L3-trees", "L1-edges", "L1-sampler",
                                                      "L1-trees", "L3-declared")
GROUPS = (L3, TREES, EDGES_GROUP, SAMPLER, PATTERNS, DECLARED)
"""The groups with statistical tests, in the order the plan lists them."""

RULE = ("Bonferroni: alpha_family split evenly over every statistical test of every group for this device "
        "(whatever --groups selects), the first test taking the rounding remainder; each test is run at "
        f"alpha = alpha_share / {SAFETY:g}")


def split(alpha_family: float, count: int) -> list[float]:
    """``alpha_family`` split evenly over ``count`` tests, the first taking the rounding remainder:
    ``math.fsum`` of the shares is ``alpha_family`` exactly.

    >>> shares = split(1e-3, 135)
    >>> math.fsum(shares) == 1e-3, len(shares), len(set(shares[1:]))
    (True, 135, 1)
    """
    if not 0 < alpha_family < 1:
        raise ValueError(f"alpha_family: must be in (0, 1), got {alpha_family}")
    if count < 1:
        return []
    rest = [alpha_family / count] * (count - 1)
    first = alpha_family - math.fsum(rest)
    for _ in range(64):  # a few ulps at most: fsum rounds the exact sum once
        total = math.fsum([first] + rest)
        if total == alpha_family:
            return [first] + rest
        first = math.nextafter(first, math.inf if total < alpha_family else -math.inf)
    raise AssertionError(f"split({alpha_family}, {count}): no remainder makes the shares sum exactly")
