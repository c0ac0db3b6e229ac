"""SPEC §6's 16-bit logits at volume (§9): ``L1-16bit``, float32's tolerance on everything computed from them.

A device given float16 or bfloat16 logits is held to float32's tolerance (``1e-4``) on every value it computes
from them: the logits are exact binary numbers, and up-casting them to float32 before any arithmetic is how to
meet it. A device that takes the softmax, divides by the temperature, forms the residual or writes penalties
back in 16 bits moves those values by 2⁻¹¹ (float16) to 2⁻⁸ (bfloat16) relative, and flips decisions that sit
that close to their boundaries. L1-injected's 16-bit cases hold a few requests and L1-volume runs float32, so
random noise rarely puts a decision there; this group does, for each 16-bit dtype the device declares:

* ``L1-16bit/chain/<dtype>``: ``CHAIN_REQUESTS`` requests of L1-volume's mix (draft probabilities and point
  proposals alternating, greedy, top-k and top-p as declared), every coin placed beside its ratio and every
  emission race beside its tie (``checks.chain.placed``);
* ``L1-16bit/sampler/<dtype>``: ``SAMPLER_REQUESTS`` requests with every §12 parameter the device declares
  (``L1-sampler/precision``'s mix), coins and races placed the same way.

Each is judged as L1-volume is (``checks.chain.volume.volume_verdict``): a decision contradicted beyond the
tolerance fails. Without injected noise nothing can be placed: each check is ``not_supported`` and says so.
"""

from __future__ import annotations

from specsim.conformance.checks.chain.placed import NEAR, placed_noise
from specsim.conformance.checks.chain.volume import volume_check
from specsim.conformance.checks.sampler.precision import sampler_precision_check
from specsim.conformance.core.results import CheckResult

SIXTEEN_BIT = ("float16", "bfloat16")
"""The logits dtypes checked here, each where the device declares it (``Capabilities.dtypes``)."""

CHAIN_REQUESTS, CHAIN_QUICK_REQUESTS = 2048, 512
SAMPLER_REQUESTS, SAMPLER_QUICK_REQUESTS = 1024, 256
"""Requests per dtype (full, ``--quick``). At suite seed 0 the torch device's 16-bit mutants contradict 86–736
placed decisions in 2048 chains (softmax, temperature, residual) and 249–369 in 2048 §12 requests (penalties);
the torch device, computing in float32, contradicts none."""

CHAIN_CHUNK = 512
"""Chain requests per call: draft probabilities and point proposals alternate call by call."""

PLACED = f"coins and races placed {NEAR[0]:g}–{NEAR[1]:g}× the tolerance from their boundaries"


def chain_check(device, *, seed: int, dtype: str, requests: int = CHAIN_REQUESTS) -> CheckResult:
    """Chains with ``dtype`` logits at volume, decisions placed by their boundaries (the module docstring)."""
    return volume_check(device, seed=seed, requests=requests, dtype=dtype, name=f"L1-16bit/chain/{dtype}",
                        place=placed_noise, note=f"; {PLACED}", chunk=CHAIN_CHUNK)


def sampler_check(device, *, seed: int, dtype: str, requests: int = SAMPLER_REQUESTS) -> CheckResult:
    """SPEC §12 with ``dtype`` logits at volume, decisions placed by their boundaries (the module docstring)."""
    return sampler_precision_check(device, seed=seed, requests=requests, name=f"L1-16bit/sampler/{dtype}",
                                   dtype=dtype, place=placed_noise, placed=PLACED)


def sixteen_bit_group(device, ctx) -> list[CheckResult]:
    """Every check of the module docstring, for each 16-bit dtype the device declares; one ``not_supported``
    result naming the cause when it declares none."""
    declared = [d for d in SIXTEEN_BIT if d in device.capabilities.dtypes]
    if not declared:
        return [CheckResult("L1-16bit", "L1", "not_supported",
                            f"device declares no 16-bit logits dtype (dtypes {', '.join(device.capabilities.dtypes)})",
                            seed=ctx.seed)]
    chain_n = CHAIN_QUICK_REQUESTS if ctx.quick else CHAIN_REQUESTS
    sampler_n = SAMPLER_QUICK_REQUESTS if ctx.quick else SAMPLER_REQUESTS
    results = []
    for dtype in declared:
        results.append(chain_check(device, seed=ctx.seed, dtype=dtype, requests=chain_n))
        results.append(sampler_check(device, seed=ctx.seed, dtype=dtype, requests=sampler_n))
    return results
