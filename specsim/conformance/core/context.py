"""What every group gets besides the device, and the suite's defaults a certificate is run at."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_SEED = 0
"""The suite seed a certificate is run at. Other seeds explore (a borderline case, a campaign); a run at
another seed is PARTIAL, so that rerunning seeds until a borderline case passes cannot make a PASS."""

DEFAULT_ALPHA_FAMILY = 1e-3
"""The family false-fail budget whose power docs/statistics.md states (detectable TV per case). A run with a
larger budget is stricter (more power, more false fails) and may PASS; a smaller one weakens every
statistical test below its documented power and is PARTIAL."""


@dataclass(frozen=True)
class Context:
    """What every group gets besides the device.

    - ``seed``: the suite seed; groups derive case seeds from it and the case.
    - ``alpha_family``: the false-fail budget of all statistical checks together.
    - ``quick``: smaller cases and sample sizes (tests of the harness itself);
      never a conformance verdict: a quick run's verdict status is ``quick``
      (nothing failed) or ``fail``, never ``pass``.
    """

    seed: int = DEFAULT_SEED
    alpha_family: float = DEFAULT_ALPHA_FAMILY
    quick: bool = False
