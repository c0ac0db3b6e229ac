"""SPEC §6 (and §11.6 for trees): the device refuses every bad input with an error naming the argument.

A device that accepts bad input silently (clamps, drops, renormalises) or
refuses it without saying which argument is wrong fails the check. A device
declaring ``tree_schemes`` is also sent every bad tree batch through
``verify_tree`` (``input/tree-…``): the chain's rules with ``num_nodes`` for
``num_draft_tokens``, then the tree's own (parents, scheme, ``"sglang"`` with
``draft_probs``, thresholds). A SPEC §12.4
rule on a sampler parameter the device does not declare is ``not_supported`` unless
the device refuses it as the rule asks (a pass).
"""

from __future__ import annotations

from specsim.conformance.core.calls import MutatedInput, Refusal, ask, mutated_result
from specsim.conformance.core.results import CheckResult
from specsim.conformance.core.spec_versions import not_sent
from specsim.testing.bad_inputs import BAD_INPUTS, NO_NOISE_WITHOUT_SEEDS, TREE_BAD_INPUTS, TREE_NO_NOISE_WITHOUT_SEEDS


def probe(device, bad, entry: str = "verify") -> CheckResult:
    name = f"input/{bad.rule.replace(' ', '-')}"
    unsent = not_sent(device.capabilities, name, "input")
    if unsent:
        return unsent
    batch, noise = bad.make()
    if noise is not None and not device.capabilities.injected_noise:
        noise = None  # the rule concerns the batch; let the device draw its own
        if bad.argument in ("uniforms", "exponentials"):
            return CheckResult(name, "input", "not_supported", "device does not take injected noise")
    try:
        ask(device, batch, noise)   # verify_tree for a TreeBatch: ``entry`` names it in the messages
    except Refusal as r:
        return CheckResult(name, "input", "not_supported", f"UnsupportedCall: {r.error}")
    except MutatedInput as e:
        return mutated_result(name, "input", e)
    except ValueError as e:
        if bad.argument in str(e):
            return CheckResult(name, "input", "pass", f"refused: {e}")
        return _undeclared(device, batch, name) or CheckResult(
            name, "input", "fail", f"refused, but the message does not name '{bad.argument}': {e}")
    except Exception as e:
        return _undeclared(device, batch, name) or CheckResult(
            name, "input", "fail", f"expected a ValueError naming '{bad.argument}', got {type(e).__name__}: {e}")
    section = "§11.6" if entry == "verify_tree" else "§6"
    return _undeclared(device, batch, name) or CheckResult(
        name, "input", "fail", f"accepted silently; SPEC {section} requires an error naming '{bad.argument}'")


def _undeclared(device, batch, name: str) -> CheckResult | None:
    """``not_supported`` for a SPEC §12.4 rule on parameters the device does not declare, which it did not
    refuse as the rule asks: its answer to an undeclared parameter is the capabilities group's business
    (§12.3), not a failed input rule. None where the device declares every parameter the call sets."""
    sampler = getattr(batch, "sampler", None)
    given = () if sampler is None else sampler.given()
    absent = [p for p in given if p not in device.capabilities.sampler]
    if not absent:
        return None
    return CheckResult(name, "input", "not_supported", f"device does not declare sampler {', '.join(absent)} "
                       "(and did not refuse the call naming the argument)")


def input_rules_group(device, ctx) -> list[CheckResult]:
    results = [probe(device, bad) for bad in BAD_INPUTS]
    if device.capabilities.rng != "none":
        results.append(probe(device, NO_NOISE_WITHOUT_SEEDS))
    return results + _tree_rules(device)


def _tree_rules(device) -> list[CheckResult]:
    """SPEC §11.6 through ``verify_tree``; one not_supported result for a device without trees."""
    if not device.capabilities.tree_schemes or not callable(getattr(device, "verify_tree", None)):
        return [CheckResult("input/tree", "input", "not_supported", "device declares no tree_schemes (SPEC §11)")]
    results = [probe(device, bad, "verify_tree") for bad in TREE_BAD_INPUTS]
    if device.capabilities.rng != "none":
        results.append(probe(device, TREE_NO_NOISE_WITHOUT_SEEDS, "verify_tree"))
    return results
