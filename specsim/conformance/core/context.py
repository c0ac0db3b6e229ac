"""What every group gets besides the device, and the suite's defaults a certificate is run at."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

DEFAULT_SEED = 0
"""The suite seed a certificate is run at. Other seeds explore (a borderline case, a campaign); a run at
another seed is PARTIAL, so that rerunning seeds until a borderline case passes cannot make a PASS."""

DEFAULT_ALPHA_FAMILY = 1e-3
"""The family false-fail budget whose power docs/statistics.md states (detectable TV per case). A run with a
larger budget is stricter (more power, more false fails) and may PASS; a smaller one weakens every
statistical test below its documented power and is PARTIAL."""

DEFAULT_CALL_BYTES = 1 << 30
"""The bytes one call's arrays may hold unless the run allows more (``specsim conform --call-bytes``)."""

CALL_BYTES_ENV = "SPECSIM_CALL_BYTES"
"""The per-call budget a run's processes read (``--call-bytes`` sets it, so isolated groups see it)."""

_UNITS = {"": 1, "B": 1, "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
          "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


def parse_bytes(text: str, what: str = "--call-bytes") -> int:
    """A size as bytes: ``"40GiB"``, ``"512 MiB"``, ``"8589934592"``; ``InvalidSize`` naming ``what`` otherwise.

    >>> parse_bytes("40GiB"), parse_bytes("1.5 GiB"), parse_bytes("4096")
    (42949672960, 1610612736, 4096)
    """
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m.group(2).upper() if m else None
    if m is None or unit not in _UNITS:
        raise InvalidSize(f"{what}: a size such as 40GiB, 512MiB or 8589934592 (bytes), got {text!r}")
    value = int(float(m.group(1)) * _UNITS[unit])
    if value < 1:
        raise InvalidSize(f"{what}: must be at least 1 byte, got {text!r}")
    return value


class InvalidSize(ValueError):
    """A size that is not a number of bytes with an optional unit."""


def call_bytes_from_env() -> int:
    """``SPECSIM_CALL_BYTES`` (a size, ``parse_bytes``) if set, else ``DEFAULT_CALL_BYTES``."""
    text = os.environ.get(CALL_BYTES_ENV)
    return DEFAULT_CALL_BYTES if not text else parse_bytes(text, CALL_BYTES_ENV)


@dataclass(frozen=True)
class Context:
    """What every group gets besides the device.

    - ``seed``: the suite seed; groups derive case seeds from it and the case.
    - ``alpha_family``: the false-fail budget of all statistical checks together.
    - ``quick``: smaller cases and sample sizes (tests of the harness itself);
      never a conformance verdict: a quick run's verdict status is ``quick``
      (nothing failed) or ``fail``, never ``pass``.
    - ``call_bytes``: the bytes one call's arrays may hold (L1-offsets runs a boundary only where its
      call fits); ``SPECSIM_CALL_BYTES`` by default, else 1 GiB.
    """

    seed: int = DEFAULT_SEED
    alpha_family: float = DEFAULT_ALPHA_FAMILY
    quick: bool = False
    call_bytes: int = field(default_factory=call_bytes_from_env)
