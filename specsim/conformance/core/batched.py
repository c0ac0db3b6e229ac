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
CPU took 10.4 s for §4's edges at batch sizes (149 checks: both its modes and every dtype twin), 39.1 s for §12's
(350 checks), 5.5 s for §4's among filler requests (298 checks: each mode's and twin's edge and neighbours, at the
8 sizes of ``declared_cases.edge_mixed_sizes``) and 39.3 s for §12's (700 checks)
(``python -m specsim.conformance.checks.sampler.group``, which prints all four). §11's edges among filler trees are a
few seconds of the L1-trees group.

Among other requests (SPEC 1.10, ``held_among``): the edge's requests once each at the start, middle and end of
a batch of each size (``mixed``), every other row a filler request (random requests that unset every batch-wide
flag the edge's own requests set: all greedy, all sampled, none filtered). The edge's copies are held as above,
and, in a token mode, the filler rows — the edge's neighbours — to the reference's tokens in a check of their own
(``neighbours_of``: ``L1/edge-neighbours/...``, outside ``L1/edge/<name>*``, so that a waiver of the edge's
deviation never covers its neighbours).

§12's and §11's edges go among fillers too (SPEC 1.11): ``held_among`` joins a §12 edge's batch with fillers
carrying §12 parameters (``testing.batches.join_requests``), and ``tree_among`` a §11 edge's one request with
filler trees, each filler row held to the reference's tokens and accepted nodes.

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
from specsim.testing.batches import join_requests, select_requests


MIXED_FILLERS = 16
"""Filler requests of a mixed batch (SPEC 1.10, 1.11), repeated in turn to fill the rows the edge's requests do not
take."""


def first_four_kinds(filler, greedy: bool, top_k: bool, top_p: bool):
    """``filler`` (a chain or tree batch of at least four requests) with requests 0 to 3 made one of each kind a
    mixed batch holds (SPEC 1.10, 1.11): greedy (sampled at T = 1 where greedy is not declared), cut by top-k at
    half of V (where declared and V > 1), cut by top-p 0.8 at T = 0.7 (where declared), and sampled unfiltered."""
    temperature, kept_k, kept_p = filler.temperature.copy(), filler.top_k.copy(), filler.top_p.copy()
    temperature[:4], kept_k[:4], kept_p[:4] = (0.0 if greedy else 1.0, 1.0, 0.7, 1.0), 0, 1.0
    if top_k and filler.vocab_size > 1:
        kept_k[1] = max(1, filler.vocab_size // 2)
    if top_p:
        kept_p[2] = 0.8
    return replace(filler, temperature=temperature, top_k=kept_k, top_p=kept_p)


def repeated(n: int, size: int) -> np.ndarray:
    """Rows of a batch of ``size``: requests ``0 .. n - 1`` in turn (a last partial round where ``size`` is not a
    multiple of ``n``)."""
    return np.arange(size, dtype=np.int64) % n


def mixed(n_edge: int, n_filler: int, size: int) -> np.ndarray:
    """Rows of a batch of ``size`` (SPEC 1.10) from a joined batch of ``n_edge`` edge requests then ``n_filler``
    filler requests: the edge's requests once each, in order, at the start, in the middle and at the end (as many of
    the three as fit apart), every other row the next filler in turn.

    >>> mixed(2, 3, 9).tolist()
    [0, 1, 2, 0, 1, 3, 4, 0, 1]
    >>> mixed(2, 3, 4).tolist()
    [0, 1, 2, 3]
    """
    if size <= n_edge:
        raise ValueError(f"mixed: size must exceed the edge's {n_edge} request(s) by at least one filler, got {size}")
    starts: list[int] = []
    for start in (0, (size - n_edge) // 2, size - n_edge):
        if all(abs(start - s) >= n_edge + 1 for s in starts):
            starts.append(start)
    rows = np.full(size, -1, np.int64)
    for start in starts:
        rows[start: start + n_edge] = np.arange(n_edge)
    free = rows < 0
    rows[free] = n_edge + np.arange(int(free.sum())) % n_filler
    return rows


def laid_out(batch, noise, order: np.ndarray):
    """(the batch of ``batch``'s requests ``order``, its noise, ``order``)."""
    sub, sub_noise = select_requests(batch, order, noise)
    return sub, sub_noise, order


def _sizes_note(sizes) -> str:
    if len(sizes) > 1 and len(set(sizes)) == 1:
        return f"in {len(sizes)} calls of {sizes[0]} request{'s' if sizes[0] > 1 else ''} ({sum(sizes)} copies)"
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
    """Each copy's tokens at each of ``sizes``, ``batch``'s requests repeated in turn (``repeated``): ``expected``
    (per edge request, its exact tokens; no allowance), else the reference's (``want``: its result for ``batch``,
    with ``noise`` or, None, the keyed streams) with SPEC §9's near-tie allowances. Those are judged once per
    distinct answer of a request (``_answers``): a copy is the same decisions again, so a rounding that flips a
    near-tie flips it in every copy on one path, and counted per copy it would pass the cap that tells rounding
    from a lower precision than declared. ``seed``: what drew the edge's coins, if anything (its result names it)."""
    (result,) = _rows_held(device, name, batch, noise, want, sizes, why, expected, seed,
                           lambda size: repeated(batch.batch_size, size), batch.batch_size, None)
    return result


def _rows_held(device, name: str, batch, noise, want, sizes, why: str, expected, seed, layout, n_edge: int,
               neighbours: str | None) -> list[CheckResult]:
    """``copy_tokens`` over the rows ``layout(size)`` (requests of ``batch``, those below ``n_edge`` the edge's):
    the edge's copies held as there, and, with ``neighbours`` (that check's name), every other row — a filler
    request's — to the reference's tokens with §9's allowances, as a check of its own. Each check is decided by
    the first size where a row of its own is wrong; the sizes run until both are decided."""
    checks = {name: expected, **({neighbours: None} if neighbours else {})}   # check → its rows' exact tokens
    found: dict[str, CheckResult] = {}
    allowed = dict.fromkeys(checks, 0)
    for size in sizes:
        sub, sub_noise, order = laid_out(batch, noise, layout(size))
        got, problem = _call(device, name, sub, sub_noise, size)
        if problem:
            problem.seed = seed
            return [problem] + ([replace(problem, name=neighbours)] if neighbours else [])
        for check, exact in checks.items():
            if check in found:
                continue
            rows = order < n_edge if check == name else order >= n_edge
            wrong = _wrong_copies(got, order, rows, exact, n_edge, size, sizes, why, check, seed)
            if wrong is None and exact is None and want is not None:
                wrong, spent = _against_reference(sub, got, order, rows, batch, want, n_edge, size, sizes, why,
                                                  check, seed)
                allowed[check] += spent
            if wrong is not None:
                found[check] = wrong
        if len(found) == len(checks):
            break
    return [found.get(check) or _held(check, why, sizes, allowed[check], seed, check != name, n_edge, batch)
            for check in checks]


def _wrong_copies(got, order, rows, expected, n_edge, size, sizes, why, name, seed) -> CheckResult | None:
    """The failure where a row of ``rows`` (bool) whose request states ``expected`` tokens emits others."""
    if expected is None:
        return None
    wrong = [n for n in np.flatnonzero(rows) if got.emitted(n) != list(expected[order[n]])]
    if not wrong:
        return None
    n = wrong[0]
    return CheckResult(name, "L1", "fail", f"at batch size {size}, {_who(order, n, n_edge)}: expected "
                       f"{list(expected[order[n]])}, got {got.emitted(n)} (num_accepted {int(got.num_accepted[n])}); "
                       f"{_of(len(wrong), order, n_edge)} wrong{_passed(sizes, size)} — the edge: {why}", seed=seed,
                       extra={"batch": size, "copies_wrong": len(wrong)})


def _against_reference(sub, got, order, rows, batch, want, n_edge, size, sizes, why, name, seed):
    """(the failure, or None, where the distinct answers of rows ``rows`` contradict the reference beyond §9's
    allowances; the allowances they used)."""
    firsts = _answers(got, order, rows)
    each, _ = select_requests(sub, firsts)
    out = VerifyOutput(got.output_token_ids[firsts][:, : each.max_k + 1], got.num_accepted[firsts])
    cmp = compare(each, out, select_step(batch, want, order[firsts]))
    if cmp.ok:
        return None, cmp.waivers
    return CheckResult(name, "L1", cmp.status, f"at batch size {size}{_passed(sizes, size)}, the distinct answers "
                       f"of the {'requests' if n_edge == batch.batch_size else 'rows'} (request j below is row "
                       f"{_listed(firsts)}[j], of {_listed([_who(order, n, n_edge) for n in firsts], 4)}): "
                       f"{cmp.summary()} — the edge: {why}", seed=seed, extra={**cmp.extra(), "batch": size}), 0


def _held(name: str, why: str, sizes, allowed: int, seed, fillers: bool, n_edge: int, batch) -> CheckResult:
    rows = "every filler row among the edge's requests" if fillers else f"every {_rows_note(n_edge, batch)}"
    return CheckResult(name, "L1", "pass", f"{why}: {rows} {_sizes_note(sizes)}"
                       + (f"; {allowed} near-tie allowance(s) used over the sizes' distinct answers (SPEC §9)"
                          if allowed else ""),
                       seed=seed, extra={"batches": list(sizes), "near_tie_allowances": allowed})


def _who(order, n: int, n_edge: int) -> str:
    """Row ``n`` of a layout, as a failure names it."""
    request = int(order[n])
    return f"copy {n} (edge request {request})" if request < n_edge else f"row {n} (filler request {request - n_edge})"


def _of(count: int, order, n_edge: int) -> str:
    """``count`` wrong copies, out of the edge's copies in ``order`` (of every row where all are the edge's)."""
    copies_here = int((order < n_edge).sum())
    return f"{count} of {copies_here} copies" + ("" if copies_here == len(order) else " of the edge")


def _rows_note(n_edge: int, batch) -> str:
    return "copy" if n_edge == batch.batch_size else "copy of the edge's requests among filler requests"


def _answers(got, order, judged) -> np.ndarray:
    """The first row of each distinct (request, emitted tokens) of one batch among rows ``judged`` (bool), in row
    order."""
    first: dict = {}
    for n in np.flatnonzero(judged):
        first.setdefault((int(order[n]), tuple(got.emitted(n))), int(n))
    return np.array(sorted(first.values()), dtype=np.int64)


def _passed(sizes, size: int) -> str:
    """What a failure at ``size`` says of the sizes before it (the ladder runs in order: each of them passed)."""
    before = [s for s in sizes if s < size]
    return f" (every copy right at {', '.join(map(str, before))})" if before else ""


def _listed(ids, most: int = 8) -> str:
    shown = ", ".join(map(str, ids[:most]))
    return f"[{shown}{', …' if len(ids) > most else ''}]"


def copy_support(device, name: str, batch, laws: list, sizes, seed: int, why: str, layout=None) -> CheckResult:
    """Each copy's emitted sequence under the device's own randomness, each row its own seed (drawn from ``seed``),
    at each of ``sizes``, the rows ``layout(size)`` (default: the edge's requests in turn): an edge request's copy
    (a request below ``len(laws)``) within its request's exact support (``laws``: per edge request, sequence →
    probability); a filler's, of the output's form only."""
    layout = layout or (lambda size: repeated(batch.batch_size, size))
    rng = np.random.default_rng(seed)
    n_edge = len(laws)
    for size in sizes:
        sub, _, order = laid_out(batch, None, layout(size))
        sub = _reseeded(sub, rng)
        got, problem = _call(device, name, sub, None, size)
        if problem:
            problem.seed = seed
            return problem
        outside = [n for n in range(size) if order[n] < n_edge and laws[order[n]].get(tuple(got.emitted(n)), 0) <= 0]
        if outside:
            n = outside[0]
            return CheckResult(name, "L1", "fail", f"at batch size {size}, {_who(order, n, n_edge)} emitted "
                               f"{got.emitted(n)}, which its exact law gives probability 0; {_of(len(outside), order, n_edge)} "
                               f"outside the support{_passed(sizes, size)} (seed {seed}) — the edge: {why}",
                               seed=seed, extra={"batch": size, "copies_wrong": len(outside)})
    return CheckResult(name, "L1", "pass", f"{why} — under the device's own randomness, every "
                       f"{_rows_note(n_edge, batch)} within its exact support "
                       f"{_sizes_note(sizes)}", seed=seed, extra={"batches": list(sizes)})


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


def held_among(device, name: str, mode: str, batch, noise, filler, sizes, why: str, *, expected: list | None, laws,
               seed: int | None, support_seed: int) -> list[CheckResult]:
    """``held_at_sizes`` of the edge's requests among ``filler`` ((a batch, its noise); SPEC 1.10), laid out by
    ``mixed``: the check ``name`` holds the edge's copies; in a token mode a second, ``neighbours_of(name)``, holds
    every filler row to the reference's tokens with §9's allowances (a neighbour read from an edge's row, or
    shifted by it, is seen there). Under the device's own draws the filler rows are held to the output's form only,
    and ``name`` is the one check."""
    n_edge = batch.batch_size
    batch, noise = join_requests(batch, filler[0], noise, filler[1] if noise is not None else None)
    layout = lambda size: mixed(n_edge, batch.batch_size - n_edge, size)   # noqa: E731
    if mode == "support":
        return [copy_support(device, name, batch, laws(), sizes, support_seed, why, layout=layout)]
    if mode == "keyed":
        noise, why = None, f"{why}, on the keyed streams"
    return _rows_held(device, name, batch, noise, reference_step(batch, noise), sizes, why,
                      expected if mode == "injected" else None, seed, layout, n_edge, neighbours_of(name))


def neighbours_of(name: str) -> str:
    """The check of an edge's filler rows, for the edge's check ``name`` among fillers (§4's, §12's or §11's).

    >>> neighbours_of("L1/edge/race-tie/keyed/mixed"), neighbours_of("L1-sampler/edge/min-p-ties/vllm/mixed")
    ('L1/edge-neighbours/race-tie/keyed/mixed', 'L1-sampler/edge-neighbours/min-p-ties/vllm/mixed')
    >>> neighbours_of("L1/trees/edge/sglang-threshold-single-zero/mixed")
    'L1/trees/edge-neighbours/sglang-threshold-single-zero/mixed'
    """
    return name.replace("/edge/", "/edge-neighbours/", 1)


def copy_tree_answers(device, name: str, batch, noise, sizes, why: str, expected: list, nodes: list) -> CheckResult:
    """A one-request tree edge (SPEC §11) repeated to each of ``sizes``, every copy with its noise: each copy's
    tokens ``expected`` and accepted nodes ``nodes``, the first size with a wrong copy deciding."""
    (result,) = _tree_rows_held(device, name, batch, noise, sizes, why, [(list(expected), list(nodes))],
                                lambda size: np.zeros(size, np.int64), None)
    return result


def copy_tree_support(device, name: str, batch, law: dict, sizes, seed: int, why: str) -> CheckResult:
    """A one-request tree edge (SPEC §11) repeated to each of ``sizes`` under the device's own randomness, every copy
    its own seed and position (drawn from ``seed``): each copy's (emitted tokens, accepted nodes) within ``law``'s
    support (``specsim.testing.trees.request_laws``), the first size with a copy outside it deciding. Support only,
    no α: a copy's wrong outcome of probability q is seen with probability 1 − (1 − q)^copies."""
    (result,) = _tree_rows_held(device, name, batch, None, sizes, why, [law], lambda size: np.zeros(size, np.int64),
                                None, seed=seed)
    return result


def tree_among(device, name: str, batch, noise, filler, sizes, why: str, expected: list,
               nodes: list, seed: int | None = None) -> list[CheckResult]:
    """``copy_tree_answers`` of a one-request tree edge among ``filler`` ((a tree batch, its noise); SPEC 1.11),
    laid out by ``mixed``: the check ``name`` holds the edge's copies to ``expected`` via ``nodes``;
    ``neighbours_of(name)`` every filler row to the reference's tokens and accepted nodes, exactly (SPEC §9's
    allowances do not reach trees). With ``seed`` (SPEC 1.14, the device's own unkeyed draws; ``noise`` None and
    ``expected`` the edge's exact law, a dict): every row its own seed and position drawn from ``seed``, the edge's
    copies held to its law's support and every filler row to its own (``request_laws``)."""
    from specsim.testing.trees import join_tree_requests, reference_tree_step, request_laws
    joined, joined_noise = join_tree_requests(batch, filler[0], noise, filler[1])
    if seed is not None:
        answers = [expected] + request_laws(joined)[1:]
    else:
        want = reference_tree_step(joined, joined_noise)
        answers = [(list(expected), list(nodes))] + [
            (want.output_token_ids[i, : int(want.num_accepted[i]) + 1].tolist(),
             [int(x) for x in want.accepted_nodes[i] if x >= 0]) for i in range(1, joined.batch_size)]
    return _tree_rows_held(device, name, joined, joined_noise, sizes, why, answers,
                           lambda size: mixed(1, joined.batch_size - 1, size), neighbours_of(name), seed=seed)


def _tree_held(answer, got: tuple) -> bool:
    """``got`` (emitted tokens, accepted nodes) is ``answer``: the same pair, or, for an exact law (a dict keyed by
    (emitted tuple, accepted nodes)), of positive probability."""
    if isinstance(answer, dict):
        return answer.get((tuple(got[0]), tuple(got[1])), 0) > 0
    return got == answer


def _tree_wanted(answer) -> str:
    if isinstance(answer, dict):
        support = sorted((list(t), list(n)) for (t, n), p in answer.items() if p > 0)
        shown = " or ".join(f"{t} via {n}" for t, n in support[:3]) + (" or …" if len(support) > 3 else "")
        return f"an answer its exact law allows ({shown}; {len(support)} in all)"
    tokens, via = answer
    return f"{tokens} via {via}"


def _tree_rows_held(device, name: str, batch, noise, sizes, why: str, answers: list, layout,
                    neighbours: str | None, seed: int | None = None) -> list[CheckResult]:
    """Tree requests of ``batch`` laid out by ``layout(size)`` at each of ``sizes`` (request 0 the edge's, any
    other a filler's), each row held to its request's ``answers`` (tokens, accepted nodes), or with ``seed`` (the
    device's own unkeyed draws, every row its own seed and position) to its exact law's support (``_tree_held``):
    the check ``name`` for the edge's copies and, with ``neighbours``, that check for the filler rows; each decided
    by the first size where a row of its own is wrong."""
    from specsim.testing.trees import select_tree_requests
    checks = [name] + ([neighbours] if neighbours else [])
    rng = None if seed is None else np.random.default_rng(seed)
    found: dict[str, CheckResult] = {}
    for size in sizes:
        order = layout(size)
        sub, sub_noise = select_tree_requests(batch, order, noise)
        if rng is not None:
            sub = replace(sub, seeds=rng.integers(0, 2**63, size, dtype=np.uint64),
                          positions=rng.integers(0, 2**31, size, dtype=np.int64))
        got, problem = call(name, "L1", lambda: ask(device, sub, sub_noise), device.capabilities)
        if problem:
            problem.detail = f"at batch size {size}: {problem.detail}"
            problem.seed = seed
            return [problem] + ([replace(problem, name=neighbours)] if neighbours else [])
        taken = [[int(x) for x in row if x >= 0] for row in np.asarray(got.accepted_nodes)]
        for check in checks:
            if check in found:
                continue
            rows = order == 0 if check == name else order > 0
            wrong = [n for n in np.flatnonzero(rows) if not _tree_held(answers[order[n]], (got.emitted(n), taken[n]))]
            if not wrong:
                continue
            n = wrong[0]
            who = _who(order, n, 1) if neighbours else f"copy {n}"
            count = _of(len(wrong), order, 1) if check == name else f"{len(wrong)} of {int(rows.sum())} filler rows"
            drawn = "" if seed is None else f" (probability 0; seed {seed})"
            found[check] = CheckResult(check, "L1", "fail", f"at batch size {size}, {who}: expected "
                                       f"{_tree_wanted(answers[order[n]])}, got {got.emitted(n)} via {taken[n]}"
                                       f"{drawn}; {count} wrong{_passed(sizes, size)} — the edge: {why}",
                                       seed=seed, extra={"batch": size, "copies_wrong": len(wrong)})
        if len(found) == len(checks):
            break
    held = {name: "copy" + (" of the edge's request among filler requests" if neighbours else "")}
    held |= {neighbours: "filler row among the edge's requests"} if neighbours else {}
    within = "" if seed is None else ", each under its own seed and position, within its exact support"
    return [found.get(check) or CheckResult(check, "L1", "pass", f"{why}: every {held[check]}{within} "
                                            f"{_sizes_note(sizes)}", seed=seed, extra={"batches": list(sizes)})
            for check in checks]
