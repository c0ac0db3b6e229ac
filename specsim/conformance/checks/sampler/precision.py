"""SPEC §12 at volume (§9): the whole sampler's arithmetic in the declared dtype, ``L1-sampler/precision``.

L1-volume's tally and verdict (``checks.chain.volume``) over requests carrying every §12 parameter the device
declares, each coin placed next to its ratio: a device computing penalties, bias or min_p in 16 bits behind a
float32 declaration flips many decisions beyond the tolerance.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from specsim.conformance.checks.chain.placed import NEAR, placed_coins, reference_rows
from specsim.conformance.checks.chain.volume import DEVICE_BUDGET_S, Tally, volume_spec, volume_verdict
from specsim.conformance.core.calls import ask, call, missing
from specsim.conformance.core.results import CheckResult
from specsim.judge.compare import TOLERANCE, compare, reference_step
from specsim.testing.batches import BatchSpec, random_batch, random_noise
from specsim.testing.seeds import case_seed

SAMPLER_REQUESTS, SAMPLER_QUICK_REQUESTS = 4096, 1024
"""Requests of ``sampler_precision_check`` (full, ``--quick``), in chunks of ``SAMPLER_CHUNK``."""
SAMPLER_CHUNK, SAMPLER_PROBE = 1024, 256
"""Chunk size; the first chunk's (it measures the device's rate before the budget rule decides the volume)."""
SAMPLER_BUDGET_S = DEVICE_BUDGET_S
"""Device seconds the default run may spend (L1-volume's); a slower device runs as many requests as fit (at least
the probe's 256), and the detail says so. The torch device needs 0.1–1.4 s for 4096 on an idle CPU core, 12–15 s on
a loaded 2-core box; the 16-bit penalty mutants contradict 45–79 (fp16) and 130–170 (bf16) decisions per 4096."""
SAMPLER_SPEC = BatchSpec(batch=SAMPLER_CHUNK, max_k=4, vocab_size=64, masked_fraction=0.0, greedy_fraction=0.1,
                         logit_scale=3.0, draw="inverse-cdf")


def near_coins(rng: np.random.Generator, batch, noise, tolerance: float):
    """``noise`` with each drafted coin moved next to its ratio ``r = t(x)/d(x)`` (SPEC §12's ``t``, the reference's
    float64 rows): ``checks.chain.placed.placed_coins`` over ``reference_rows(batch)``. Each coin that can sit near
    its ratio does, at a relative distance drawn log-uniformly from ``NEAR`` × the dtype's tolerance: beyond the
    tolerance, so a device computing in its declared dtype never flips one, and inside what 16-bit arithmetic moves,
    so a 16-bit step behind the declaration flips many. Returns the new noise."""
    return placed_coins(rng, batch, noise, tolerance, reference_rows(batch))


def sampler_precision_check(device, *, seed: int, requests: int = SAMPLER_REQUESTS, name: str = "L1-sampler/precision",
                            budget_s: float | None = SAMPLER_BUDGET_S, dtype: str | None = None, place=None,
                            placed: str | None = None, edit=None) -> CheckResult:
    """SPEC §12 in the declared dtype at volume (§9): random requests with every §12 parameter the device declares
    (``sampler_params.random_sampler`` along repetition loops), chunks alternating the declared order profiles and
    draft probabilities with point proposals, float32 where declared, each coin placed next to its ratio
    (``near_coins``), compared with the reference token for token. A decision contradicted beyond the dtype's
    tolerance fails: penalties, bias or min_p computed in 16 bits behind a float32 declaration.

    ``dtype``: the logits' dtype (default float32 where declared); ``place``: ``(rng, batch, noise, tolerance) ->
    noise`` in place of ``near_coins``, with ``placed`` saying what it places (for the result's detail). ``edit``:
    ``batch -> batch`` applied to each batch once its noise is drawn, for the device and the reference alike (an
    experiment that removes one cause from the same requests: ``specsim.field.table``)."""
    from devices.protocol import SAMPLER_ORDERS
    from specsim.testing.sampler_params import random_sampler, repetitive
    caps = device.capabilities
    dtype = dtype or ("float32" if "float32" in caps.dtypes else caps.dtypes[0])
    params = tuple(caps.sampler)
    orders = [o for o in SAMPLER_ORDERS if o in caps.sampler_orders]
    schemes = [point for point, mode in ((False, "draft_probs"), (True, "point_proposals")) if getattr(caps, mode)]
    check_seed = case_seed(seed, name, dtype)
    why = ("device declares no sampler parameter" if not params else "device declares no sampler order"
           if not orders else None) or missing(caps, (), vocab_size=SAMPLER_SPEC.vocab_size, dtype=dtype) or (
        None if caps.injected_noise else "device does not take injected noise") or (
        None if schemes else "device declares neither draft_probs nor point_proposals")
    if why:
        return CheckResult(name, "L1", "not_supported", why, seed=check_seed)
    tally, rng, chunk, note = Tally(), np.random.default_rng(check_seed), 0, ""
    target = requests
    while tally.requests < target:
        size = min(SAMPLER_PROBE if chunk == 0 else SAMPLER_CHUNK, target - tally.requests)
        spec = volume_spec(caps, dtype, size, schemes[chunk % len(schemes)])
        spec = replace(spec, greedy_fraction=min(spec.greedy_fraction, SAMPLER_SPEC.greedy_fraction),
                       masked_fraction=0.0, logit_scale=SAMPLER_SPEC.logit_scale)
        batch = repetitive(rng, random_batch(rng, spec))
        batch = replace(batch, sampler=random_sampler(rng, batch, params, orders[chunk % len(orders)]))
        noise = (place or near_coins)(rng, batch, random_noise(rng, batch), TOLERANCE[dtype])
        if edit is not None:   # after every draw: the same requests, edited for the device and the reference alike
            batch = edit(batch)
        chunk += 1
        start = time.perf_counter()
        got, problem = call(name, "L1", lambda: ask(device, batch, noise), device.capabilities)
        if problem:
            return problem
        device_s, start = time.perf_counter() - start, time.perf_counter()
        cmp = compare(batch, got, reference_step(batch, noise), repro=f" [{name}, seed {check_seed}]")
        tally.add(batch, cmp, device_s, time.perf_counter() - start)
        if tally.requests == size and budget_s is not None and tally.device_s * requests / size > budget_s:
            target = max(size, int(budget_s * size / tally.device_s))
            note = f"; volume reduced to {target} requests to fit {budget_s:g} s of device time"
    placed = placed or f"coins placed {NEAR[0]:g}–{NEAR[1]:g}× the tolerance from their ratios"
    return volume_verdict(name, tally, dtype, check_seed, f"; {placed}; orders {', '.join(orders)}{note}",
                          requested=requests)
