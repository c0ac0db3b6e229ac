"""Case seeds: a stable hash of the suite seed and the case's name.

Never drawn by hypothesis, never ``hash()`` (salted per process): the same
case gets the same seed on every machine, forever.

>>> case_seed(0, "L1/injected/full/V8") == case_seed(0, "L1/injected/full/V8")
True
>>> case_seed(0, "a") != case_seed(1, "a")
True
"""

from __future__ import annotations

import hashlib


def case_seed(suite_seed: int, *parts: object) -> int:
    """A 63-bit seed from ``suite_seed`` and the parts naming the case."""
    text = "\x1f".join([str(int(suite_seed))] + [str(p) for p in parts])
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1
