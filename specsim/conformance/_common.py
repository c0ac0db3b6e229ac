"""What the groups share: capability gating and calling the device safely."""

from __future__ import annotations

import traceback

from devices.protocol import Capabilities, UnsupportedCall
from specsim.conformance.results import CheckResult
from specsim.testing.compare import output_problems


def missing(caps: Capabilities, needs, *, vocab_size: int = 0, max_k: int = 0, dtype: str | None = None) -> str | None:
    """Why the device cannot be asked this case (None if it can)."""
    lacking = sorted(n for n in needs if not getattr(caps, n))
    if lacking:
        return f"device does not declare {', '.join(lacking)}"
    if vocab_size > caps.max_vocab_size:
        return f"V={vocab_size} > declared max_vocab_size={caps.max_vocab_size}"
    if max_k > caps.max_k:
        return f"K={max_k} > declared max_k={caps.max_k}"
    if dtype is not None and dtype not in caps.dtypes:
        return f"dtype {dtype} not in declared dtypes {caps.dtypes}"
    return None


def call(name: str, layer: str, fn):
    """Run ``fn()``; turn UnsupportedCall into not_supported and any other exception into error."""
    try:
        return fn(), None
    except Malformed:  # not a crash: the group turns it into its failing well-formed-output check
        raise
    except UnsupportedCall as e:
        return None, CheckResult(name, layer, "not_supported", f"device raised UnsupportedCall: {e}")
    except Exception as e:
        return None, CheckResult(name, layer, "error", f"device raised {type(e).__name__}: {e}\n"
                                 f"{traceback.format_exc(limit=6)}")


class Malformed(Exception):
    """A device's output broke SPEC §7 (shape, range, padding): the group reports a failing check."""


def formed(device, batch, noise=None):
    """``device.verify(batch, noise)``, or ``Malformed`` naming what is wrong with its output."""
    out = device.verify(batch, noise)
    problems = output_problems(batch, out)
    if problems:
        raise Malformed(f"batch of {batch.batch_size} request(s), V={batch.vocab_size}: " + "; ".join(problems))
    return out


def malformed_result(layer: str, e: Malformed) -> CheckResult:
    return CheckResult(f"{layer}/well-formed-output", layer, "fail", f"malformed output (SPEC §7): {e}")
