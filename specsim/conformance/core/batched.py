"""An edge at every batch size of the ladder (SPEC 1.9): its requests repeated to fill a batch of each size.

A hand-built edge (SPEC §4, §11, §12) holds a few requests; a device may switch path by batch size (a warp of requests,
a block, a second launch, a split grid) and lose an edge's rule on the path the edge's own call never takes. Here
the edge's requests are repeated, in turn, to fill a batch of each size of ``declared_cases.edge_batch_sizes`` (each
side of the sizes where kernels switch paths), and every copy, at every row of every batch, is held to its request's
answer:

* ``copy_tokens`` — with injected noise (each copy its request's noise) or on §5.2's keyed streams (each copy its
  request's seed and position, so the same draws): each copy's tokens, the edge's exact ones where it states them,
  else the reference's with SPEC §9's near-tie allowances;
* ``copy_support`` — under the device's own randomness (each copy its own seed): each copy's emitted sequence has
  positive probability under its request's exact law. Support only, no α: the law itself is held at the edge's
  own check, which already runs the edge's requests hundreds of times in one call.

Cost: 6075 requests an edge and mode (290 with ``--quick``). On one core of a 2-core AMD EPYC, the torch device on the
CPU took 10.3 s for §4's edges at batch sizes (149 checks: both its modes and every dtype twin) and 47.4 s for §12's
(350 checks) (``python -m specsim.conformance.checks.sampler.group``, which prints both).

A check is one edge in one mode at every size, smallest first; the first size where a copy is wrong decides it, its
detail naming, before the edge's own text, the size, the sizes that passed, the copy, its request and both answers.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import VerifyOutput
from specsim.conformance.core.calls import ask, call
from specsim.conformance.core.results import CheckResult
from specsim.judge.compare import compare, output_problems, reference_step, select_step
from specsim.testing.batches import select_requests


def copies(batch, noise, size: int):
    """``batch``'s requests repeated in turn to ``size`` requests (a last partial round where ``size`` is not a
    multiple): (the batch, its noise (None stays None), ``order``: the edge request each copy is)."""
    order = np.arange(size, dtype=np.int64) % batch.batch_size
    sub, sub_noise = select_requests(batch, order, noise)
    return sub, sub_noise, order


def _sizes_note(sizes) -> str:
    return f"at every batch size of {', '.join(map(str, sizes))} ({sum(sizes)} copies)"


def _call(device, name: str, batch, noise, size: int):
    """The device's output for one size's batch, or (None, the check's result naming the size)."""
    got, problem = call(name, "L1", lambda: ask(device, batch, noise), device.capabilities)
    if problem:
        problem.detail = f"at batch size {size}: {problem.detail}"
        return None, problem
    broken = output_problems(batch, got)
    if broken:
        return None, CheckResult(name, "L1", "fail", f"at batch size {size}: " + "; ".join(broken))
    return got, None


def copy_tokens(device, name: str, batch, noise, want, sizes, why: str, expected: list | None = None,
                seed: int | None = None) -> CheckResult:
    """Each copy's tokens at each of ``sizes``: ``expected`` (per edge request, its exact tokens; no allowance),
    else the reference's (``want``: its result for ``batch``, with ``noise`` or, None, the keyed streams) with SPEC
    §9's near-tie allowances. Those are judged once per distinct answer of an edge request (``_answers``): a copy
    is the same decisions again, so a rounding that flips a near-tie flips it in every copy on one path, and counted
    per copy it would pass the cap that tells rounding from a lower precision than declared. ``seed``: what drew the
    edge's coins, if anything (its result names it)."""
    allowed = 0
    for size in sizes:
        sub, sub_noise, order = copies(batch, noise, size)
        got, problem = _call(device, name, sub, sub_noise, size)
        if problem:
            problem.seed = seed
            return problem
        if expected is not None:
            wrong = [n for n in range(size) if got.emitted(n) != list(expected[order[n]])]
            if wrong:
                n = wrong[0]
                return CheckResult(name, "L1", "fail", f"at batch size {size}, copy {n} (edge request {order[n]}): "
                                   f"expected {list(expected[order[n]])}, got {got.emitted(n)} (num_accepted "
                                   f"{int(got.num_accepted[n])}); {len(wrong)} of {size} copies wrong{_passed(sizes, size)}"
                                   f" — the edge: {why}", seed=seed, extra={"batch": size, "copies_wrong": len(wrong)})
            continue
        firsts = _answers(got, order)
        each, _ = select_requests(sub, firsts)
        out = VerifyOutput(got.output_token_ids[firsts][:, : each.max_k + 1], got.num_accepted[firsts])
        cmp = compare(each, out, select_step(batch, want, order[firsts]))
        if not cmp.ok:
            return CheckResult(name, "L1", cmp.status, f"at batch size {size}{_passed(sizes, size)}, the distinct answers "
                               f"of the edge's requests (request j below is copy {_listed(firsts)}[j]): {cmp.summary()} — "
                               f"the edge: {why}", seed=seed, extra={**cmp.extra(), "batch": size})
        allowed += cmp.waivers
    return CheckResult(name, "L1", "pass", f"{why}: every copy {_sizes_note(sizes)}"
                       + (f"; {allowed} near-tie allowance(s) used over the sizes' distinct answers (SPEC §9)"
                          if allowed else ""),
                       seed=seed, extra={"batches": list(sizes), "near_tie_allowances": allowed})


def _answers(got, order) -> np.ndarray:
    """The first copy of each distinct (edge request, emitted tokens) of one batch, in copy order."""
    first: dict = {}
    for n in range(len(order)):
        first.setdefault((int(order[n]), tuple(got.emitted(n))), n)
    return np.array(sorted(first.values()), dtype=np.int64)


def _passed(sizes, size: int) -> str:
    """What a failure at ``size`` says of the sizes before it (the ladder runs in order: each of them passed)."""
    before = [s for s in sizes if s < size]
    return f" (every copy right at {', '.join(map(str, before))})" if before else ""


def _listed(ids, most: int = 8) -> str:
    shown = ", ".join(map(str, ids[:most]))
    return f"[{shown}{', …' if len(ids) > most else ''}]"


def copy_support(device, name: str, batch, laws: list, sizes, seed: int, why: str) -> CheckResult:
    """Each copy's emitted sequence under the device's own randomness, each copy its own seed (drawn from ``seed``),
    at each of ``sizes``: within its request's exact support (``laws``: per edge request, sequence → probability)."""
    rng = np.random.default_rng(seed)
    for size in sizes:
        sub, _, order = copies(batch, None, size)
        sub = _reseeded(sub, rng)
        got, problem = _call(device, name, sub, None, size)
        if problem:
            problem.seed = seed
            return problem
        outside = [n for n in range(size) if laws[order[n]].get(tuple(got.emitted(n)), 0) <= 0]
        if outside:
            n = outside[0]
            return CheckResult(name, "L1", "fail", f"at batch size {size}, copy {n} (edge request {order[n]}) emitted "
                               f"{got.emitted(n)}, which its exact law gives probability 0; {len(outside)} of {size} "
                               f"copies outside the support{_passed(sizes, size)} (seed {seed}) — the edge: {why}",
                               seed=seed, extra={"batch": size, "copies_wrong": len(outside)})
    return CheckResult(name, "L1", "pass", f"{why} — under the device's own randomness, every copy within its exact "
                       f"support {_sizes_note(sizes)}", seed=seed, extra={"batches": list(sizes)})


def _reseeded(batch, rng: np.random.Generator):
    """``batch`` with a distinct seed per request (its own randomness is then independent from copy to copy)."""
    return replace(batch, seeds=rng.integers(0, 2**63, batch.batch_size, dtype=np.uint64))


def held_at_sizes(device, name: str, mode: str, batch, noise, sizes, why: str, *, expected: list | None, laws,
                  seed: int | None, support_seed: int) -> CheckResult:
    """One edge's check at every size of ``sizes`` in ``mode`` (``"injected"``, ``"keyed"`` or ``"support"``, as the
    groups' ``batch_modes`` name them): ``copy_tokens`` with ``noise`` and ``expected`` (None: the reference's tokens
    with §9's allowances), ``copy_tokens`` on the keyed streams, or ``copy_support`` of ``laws()`` (per edge request,
    its exact law; called only here) under seeds drawn from ``support_seed``. ``seed``: what drew the edge's coins."""
    if mode == "support":
        return copy_support(device, name, batch, laws(), sizes, support_seed, why)
    if mode == "keyed":
        return copy_tokens(device, name, batch, None, reference_step(batch, None), sizes, f"{why}, on the keyed streams")
    want = None if expected is not None else reference_step(batch, noise)
    return copy_tokens(device, name, batch, noise, want, sizes, why, expected=expected, seed=seed)


def copy_tree_answers(device, name: str, batch, noise, sizes, why: str, expected: list, nodes: list) -> CheckResult:
    """A one-request tree edge (SPEC §11) repeated to each of ``sizes``, every copy with its noise: each copy's
    tokens ``expected`` and accepted nodes ``nodes``, the first size with a wrong copy deciding."""
    from specsim.testing.trees import select_tree_requests
    for size in sizes:
        sub, sub_noise = select_tree_requests(batch, np.zeros(size, np.int64), noise)
        got, problem = call(name, "L1", lambda: ask(device, sub, sub_noise), device.capabilities)
        if problem:
            problem.detail = f"at batch size {size}: {problem.detail}"
            return problem
        taken = [[int(x) for x in row if x >= 0] for row in np.asarray(got.accepted_nodes)]
        wrong = [n for n in range(size) if got.emitted(n) != expected or taken[n] != nodes]
        if wrong:
            n = wrong[0]
            return CheckResult(name, "L1", "fail", f"at batch size {size}, copy {n}: expected {expected} via {nodes}, "
                               f"got {got.emitted(n)} via {taken[n]}; {len(wrong)} of {size} copies wrong"
                               f"{_passed(sizes, size)} — the edge: {why}",
                               extra={"batch": size, "copies_wrong": len(wrong)})
    return CheckResult(name, "L1", "pass", f"{why}: every copy {_sizes_note(sizes)}", extra={"batches": list(sizes)})
