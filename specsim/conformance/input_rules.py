"""SPEC §6: the device refuses every bad input with an error naming the argument.

A device that accepts bad input silently (clamps, drops, renormalises) or
refuses it without saying which argument is wrong fails the check.
"""

from __future__ import annotations

from specsim.conformance.results import CheckResult
from specsim.testing.bad_inputs import BAD_INPUTS, NO_NOISE_WITHOUT_SEEDS

from devices.protocol import UnsupportedCall


def _probe(device, bad) -> CheckResult:
    name = f"input/{bad.rule.replace(' ', '-')}"
    batch, noise = bad.make()
    if noise is not None and not device.capabilities.injected_noise:
        noise = None  # the rule concerns the batch; let the device draw its own
        if bad.argument in ("uniforms", "exponentials"):
            return CheckResult(name, "input", "not_supported", "device does not take injected noise")
    try:
        device.verify(batch, noise)
    except UnsupportedCall as e:
        return CheckResult(name, "input", "not_supported", f"UnsupportedCall: {e}")
    except ValueError as e:
        ok = bad.argument in str(e)
        return CheckResult(name, "input", "pass" if ok else "fail",
                           f"refused: {e}" if ok else f"refused, but the message does not name '{bad.argument}': {e}")
    except Exception as e:
        return CheckResult(name, "input", "fail", f"expected a ValueError naming '{bad.argument}', got {type(e).__name__}: {e}")
    return CheckResult(name, "input", "fail", f"accepted silently; SPEC §6 requires an error naming '{bad.argument}'")


def input_rules_group(device, ctx) -> list[CheckResult]:
    results = [_probe(device, bad) for bad in BAD_INPUTS]
    if device.capabilities.rng != "none":
        results.append(_probe(device, NO_NOISE_WITHOUT_SEEDS))
    return results
