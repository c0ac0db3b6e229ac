"""The ``capabilities`` group: every capability checked both ways, from a table (SPEC §10).

Like PyTorch's OpInfo dtype checks: for each row (a capability, a minimal valid call that
needs it), a device that **declares** it must answer the call with a well-formed output
(SPEC §7), and a device that does **not** must raise ``UnsupportedCall`` — not answer
silently, not raise anything else. A limit (``max_k``, ``max_vocab_size``; for trees ``max_k``
as the depth and ``max_tree_nodes``) is checked at the limit (works) and one past it
(raises; a ``max_tree_nodes`` never declared may be refused or served there, as the reference does). One check per row, named ``capabilities/<row>``; rows of the core profile carry
``extra["core"]`` so the verdict knows a core mode that was not served (``profiles.verdict``).

Add a row for a capability you introduce: ``Row(name, core, declared, edit)``, where
``edit(call, caps)`` turns the base call (one request, K = 2, V = 8, served by what the
device declares) into one needing the capability.

    >>> [r.name for r in ROWS][:4]
    ['draft_probs', 'point_proposals', 'greedy', 'temperature']
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from devices.protocol import (PLACEHOLDER_TOKEN_ID, SAMPLER_PARAMETERS, TREE_SCHEMES, Capabilities, Noise,
                              SamplerParams, TreeBatch, UnsupportedCall, VerifyBatch)
from specsim.conformance.core.calls import MutatedInput, Refusal, WrongReturn, ask, mutated_result, structure_problems
from specsim.conformance.core.results import CheckResult
from specsim.conformance.core.spec_versions import not_sent

V, K = 8, 2
"""The base call's vocabulary and draft count: small, so every device answers in milliseconds."""

LARGEST_ALLOCATED_VOCAB = 1 << 20
"""``max_vocab_size`` at the limit is called only up to this (a declared 2^30 is not allocated)."""


@dataclass(frozen=True)
class Call:
    """One call: a chain batch (or a tree batch) and its noise (None: the device draws)."""

    batch: VerifyBatch | TreeBatch
    noise: Noise | None
    needs: frozenset[str]
    """Every capability the call needs besides the row's own (``Capabilities`` field names,
    ``dtype:<name>``, ``rng``): a declared row whose call needs one of these undeclared is
    not_supported (the row cannot be isolated)."""


def _dtype(caps: Capabilities) -> str:
    return "float32" if "float32" in caps.dtypes or not caps.dtypes else caps.dtypes[0]


def _logits(rows: int, vocab: int, dtype: str, rng: np.random.Generator) -> np.ndarray:
    logits = rng.normal(size=(rows, vocab))
    if dtype == "bfloat16":
        import ml_dtypes
        return logits.astype(ml_dtypes.bfloat16)
    return logits.astype(dtype)


def chain_call(caps: Capabilities, *, k: int = K, vocab: int = V, dtype: str | None = None,
               draft_probs: bool | None = None, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
               injected: bool | None = None) -> Call:
    """A one-request step with ``k`` drafts over ``vocab`` tokens; unset options follow ``caps``.

    >>> c = chain_call(Capabilities(injected_noise=True, rng="none", max_vocab_size=8))
    >>> c.batch.target_logits.shape, c.batch.draft_probs.shape, sorted(c.needs)
    ((3, 8), (2, 8), ['draft_probs', 'dtype:float32', 'injected_noise'])
    """
    rng = np.random.default_rng(k * 1_000_003 + vocab)
    dtype = dtype or _dtype(caps)
    draft_probs = caps.draft_probs if draft_probs is None else draft_probs
    injected = caps.injected_noise if injected is None else injected
    probs = None
    if draft_probs:
        rows = rng.random((k, vocab)) + 0.1
        probs = (rows / rows.sum(1, keepdims=True)).astype(dtype if dtype in ("float32", "float64") else "float32")
    batch = VerifyBatch(np.array([k], np.int64), rng.integers(0, vocab, k).astype(np.int64), probs,
                        _logits(k + 1, vocab, dtype, rng), np.array([temperature]), np.array([top_k], np.int64),
                        np.array([top_p]), np.array([7], np.uint64), np.array([3], np.int64))
    noise = Noise(rng.random(k), rng.exponential(size=(1, vocab))) if injected else None
    needs = {f"dtype:{dtype}", "draft_probs" if draft_probs else "point_proposals",
             "injected_noise" if injected else "rng"}
    return Call(batch, noise, frozenset(needs))


def tree_call(caps: Capabilities, scheme: str) -> Call:
    """A one-request tree (root → a → b, root → c) served by ``scheme`` (SPEC §11)."""
    rng = np.random.default_rng(11)
    base = chain_call(caps, k=3)
    greedy = scheme == "greedy"
    tree = TreeBatch(np.array([3], np.int64), np.array([-1, 0, -1], np.int64), np.array([1, 2, 3], np.int64),
                     base.batch.draft_probs if scheme == "rrs" else None, base.batch.target_logits,
                     np.array([0.0 if greedy else 1.0]), np.zeros(1, np.int64), np.ones(1),
                     base.batch.seeds, base.batch.positions, scheme="rrs" if greedy else scheme)
    noise = Noise(rng.random(3), rng.exponential(size=(1, V))) if base.noise is not None else None
    needs = {n for n in base.needs if n.startswith("dtype:") or n in ("injected_noise", "rng")}
    return Call(tree, noise, frozenset(needs | ({"draft_probs"} if scheme == "rrs" else set())))


LARGEST_TREE_PROBED = 4096
"""A tree limit (``max_k`` as depth, ``max_tree_nodes``) above this is called at this size, and one
past it is not_supported (like ``LARGEST_ALLOCATED_VOCAB``)."""
TREE_PROBE_DEPTH = 8
"""The depth of the node-limit probes (or ``max_k`` if smaller): the nodes spread over the levels."""


def limit_scheme(caps: Capabilities) -> str:
    """The scheme a tree-limit probe is served by: the first declared of greedy, rrs, sglang (greedy
    when none is: the call must then be refused anyway)."""
    return next((s for s in ("greedy", "rrs", "sglang") if s in caps.tree_schemes), "greedy")


def tree_limit_call(caps: Capabilities, nodes: int, depth: int) -> Call:
    """One request's tree of ``nodes`` nodes and depth ``min(nodes, depth)`` (``layered_parents``:
    chains under a root of ``≈ nodes / depth`` children), served by ``limit_scheme``.

    >>> caps = Capabilities(injected_noise=True, rng="none", max_vocab_size=8, tree_schemes=("rrs",))
    >>> c = tree_limit_call(caps, 5, 2)
    >>> c.batch.parents.tolist(), int(c.batch.depths().max()), c.batch.draft_probs.shape
    ([-1, -1, -1, 2, 1], 2, (5, 8))
    """
    from specsim.testing.trees import layered_parents
    scheme = limit_scheme(caps)
    rng = np.random.default_rng(nodes * 1_000_003 + depth)
    dtype = _dtype(caps)
    probs = None
    if scheme == "rrs":
        rows = rng.random((nodes, V)) + 0.1
        probs = (rows / rows.sum(1, keepdims=True)).astype(dtype if dtype in ("float32", "float64") else "float32")
    greedy = scheme == "greedy"
    tree = TreeBatch(np.array([nodes], np.int64), layered_parents(nodes, depth),
                     rng.integers(0, V, nodes).astype(np.int64), probs, _logits(nodes + 1, V, dtype, rng),
                     np.array([0.0 if greedy else 1.0]), np.zeros(1, np.int64), np.ones(1), np.array([7], np.uint64),
                     np.array([3], np.int64), scheme="rrs" if greedy else scheme)
    noise = Noise(rng.random(nodes), rng.exponential(size=(1, V))) if caps.injected_noise else None
    needs = {f"dtype:{dtype}", "injected_noise" if caps.injected_noise else "rng"}
    return Call(tree, noise, frozenset(needs | ({"draft_probs"} if scheme == "rrs" else set())))


def _tree_depth_limit(caps: Capabilities) -> int:
    """The deepest tree the declaration admits: ``max_k``, unless ``max_tree_nodes`` nodes cannot reach it."""
    return min(caps.max_k, caps.tree_node_limit)


def _past_depth(caps: Capabilities) -> bool | None:
    """A tree one level deeper than ``max_k`` (a chain of ``max_k + 1`` nodes) must be refused; None
    where that chain would also break ``max_tree_nodes`` (the refusal would not say which limit) or
    is beyond ``LARGEST_TREE_PROBED``."""
    if caps.tree_schemes and (caps.max_k + 1 > caps.tree_node_limit or caps.max_k >= LARGEST_TREE_PROBED):
        return None
    return False


def _why_not_past_depth(caps: Capabilities) -> str:
    if caps.max_k >= LARGEST_TREE_PROBED:
        return f"declared max_k {caps.max_k} is above the {LARGEST_TREE_PROBED} this group calls as a tree depth"
    return (f"a tree of depth max_k + 1 = {caps.max_k + 1} has more than max_tree_nodes "
            f"{caps.tree_node_limit} nodes: its refusal cannot be attributed to the depth")


def sampler_call(caps: Capabilities, name: str) -> Call:
    """A chain step using SPEC §12's parameter ``name`` (canonical order) at a mild strength."""
    base = chain_call(caps)
    rows, vocab = base.batch.target_logits.shape
    values = {"token_mask": {"token_mask": np.ones((rows, vocab), bool)},
              "allowed_token_ids": {"allowed_token_ids": (np.arange(vocab),)},
              "bad_words": {"bad_words": ((np.array([0, 1]),),)},
              "min_tokens": {"min_tokens": np.array([1]), "stop_token_ids": (np.array([0]),)},
              "logit_bias": {"logit_bias": np.full((1, vocab), 0.5)},
              "repetition_penalty": {"repetition_penalty": np.array([1.2]), "prompt_token_ids": (np.array([1]),)},
              "frequency_penalty": {"frequency_penalty": np.array([0.5])},
              "presence_penalty": {"presence_penalty": np.array([0.5])},
              "min_p": {"min_p": np.array([0.05])}}[name]
    return Call(replace(base.batch, sampler=SamplerParams(**values)), base.noise, base.needs)


def withdrawn_call(caps: Capabilities) -> Call:
    """A chain step with draft probabilities whose first draft is withdrawn (SPEC §4: id -1, its row read)."""
    base = chain_call(caps, draft_probs=True)
    ids = base.batch.draft_token_ids.copy()
    ids[0] = PLACEHOLDER_TOKEN_ID
    withdrawn = np.zeros(len(ids), bool)
    withdrawn[0] = True
    return Call(replace(base.batch, draft_token_ids=ids, withdrawn=withdrawn), base.noise, base.needs)


def unwithdrawn_call(caps: Capabilities) -> Call:
    """A chain step with draft probabilities and an all-False ``withdrawn`` mask: no draft is withdrawn
    (SPEC §4, as ``withdrawn`` None), so every device serves it, withdrawn drafts declared or not."""
    base = chain_call(caps, draft_probs=True)
    return Call(replace(base.batch, withdrawn=np.zeros(len(base.batch.draft_token_ids), bool)), base.noise,
                base.needs)


EITHER = "either"
"""``Row.declared``'s answer for a limit the device never declared: it may refuse the call beyond
SPEC's default (``UnsupportedCall``) or serve it; a well-formed answer and a refusal both pass."""


def _past_node_limit(caps: Capabilities) -> bool | str | None:
    """One node past ``max_tree_nodes``: must be refused where declared; either way where the
    limit is SPEC §11.1's default, which the device never chose; None beyond ``LARGEST_TREE_PROBED``."""
    if caps.tree_schemes and caps.tree_node_limit >= LARGEST_TREE_PROBED:
        return None
    return EITHER if caps.tree_schemes and caps.max_tree_nodes is None else False


@dataclass(frozen=True)
class Row:
    """A capability, whether the core needs it, whether ``caps`` declare it, and its call."""

    name: str
    core: bool
    declared: Callable[[Capabilities], bool | str | None]
    """True: must be served; False: must raise; ``EITHER``: may do either (a limit never declared);
    None: not checkable here (not_supported)."""
    call: Callable[[Capabilities], Call]
    unchecked: Callable[[Capabilities], str] | None = None
    """Why ``declared`` said None (default: the declared ``max_vocab_size`` is not allocated)."""


def _flag(name: str) -> Callable[[Capabilities], bool]:
    return lambda caps: bool(getattr(caps, name))


ROWS: list[Row] = [
    Row("draft_probs", True, _flag("draft_probs"), lambda c: chain_call(c, draft_probs=True)),
    Row("point_proposals", False, _flag("point_proposals"), lambda c: chain_call(c, draft_probs=False)),
    Row("greedy", True, _flag("greedy"), lambda c: chain_call(c, temperature=0.0)),
    Row("temperature", True, lambda c: True, lambda c: chain_call(c, temperature=0.7)),
    Row("top_k", True, _flag("top_k"), lambda c: chain_call(c, top_k=3)),
    Row("top_p", True, _flag("top_p"), lambda c: chain_call(c, top_p=0.5)),
    Row("injected_noise", False, _flag("injected_noise"), lambda c: chain_call(c, injected=True)),
    Row("own-randomness", False, lambda c: c.rng != "none", lambda c: chain_call(c, injected=False)),
    Row("withdrawn_drafts", False, _flag("withdrawn_drafts"), withdrawn_call),
    Row("withdrawn-all-false", False, lambda c: True, unwithdrawn_call),
    *[Row(f"dtype-{d}", d == "float32", lambda c, d=d: d in c.dtypes, lambda c, d=d: chain_call(c, dtype=d))
      for d in ("float32", "float64", "float16", "bfloat16")],
    Row("max_k", True, lambda c: True, lambda c: chain_call(c, k=c.max_k)),
    Row("max_k+1", False, lambda c: False, lambda c: chain_call(c, k=c.max_k + 1)),
    Row("max_vocab_size", True, lambda c: True,
        lambda c: chain_call(c, k=1, vocab=min(c.max_vocab_size, LARGEST_ALLOCATED_VOCAB))),
    Row("max_vocab_size+1", False, lambda c: False if c.max_vocab_size < LARGEST_ALLOCATED_VOCAB else None,
        lambda c: chain_call(c, k=0, vocab=c.max_vocab_size + 1)),
    *[Row(f"tree-{s}", False, lambda c, s=s: s in c.tree_schemes, lambda c, s=s: tree_call(c, s))
      for s in TREE_SCHEMES],
    Row("tree-max_k", False, lambda c: bool(c.tree_schemes),
        lambda c: (lambda d: tree_limit_call(c, d, d))(min(_tree_depth_limit(c), LARGEST_TREE_PROBED))),
    Row("tree-max_k+1", False, _past_depth, lambda c: tree_limit_call(c, c.max_k + 1, c.max_k + 1),
        unchecked=_why_not_past_depth),
    Row("tree-max_tree_nodes", False, lambda c: bool(c.tree_schemes),
        lambda c: tree_limit_call(c, min(c.tree_node_limit, LARGEST_TREE_PROBED), min(c.max_k, TREE_PROBE_DEPTH))),
    Row("tree-max_tree_nodes+1", False, _past_node_limit,
        lambda c: tree_limit_call(c, c.tree_node_limit + 1, min(c.max_k, TREE_PROBE_DEPTH)),
        unchecked=lambda c: f"declared max_tree_nodes {c.max_tree_nodes} is above the {LARGEST_TREE_PROBED} "
                            "this group calls"),
    *[Row(f"sampler-{p}", False, lambda c, p=p: p in c.sampler and "canonical" in c.sampler_orders,
          lambda c, p=p: sampler_call(c, p)) for p in SAMPLER_PARAMETERS],
]
"""The table, in check order. A declared ``max_vocab_size`` above ``LARGEST_ALLOCATED_VOCAB``
is not allocated: it is called at that size, and one past the limit is not_supported."""


def _has(caps: Capabilities, need: str) -> bool:
    if need.startswith("dtype:"):
        return need[len("dtype:"):] in caps.dtypes
    if need == "rng":
        return caps.rng != "none"
    return bool(getattr(caps, need))


def _invoke(device, call: Call):
    """The row's call through ``ask`` (read-only inputs, SPEC §1); a refusal as the ``UnsupportedCall`` itself."""
    if isinstance(call.batch, TreeBatch) and not hasattr(device, "verify_tree"):
        raise UnsupportedCall("verify_tree (the device has none)")
    try:
        return ask(device, call.batch, call.noise)
    except Refusal as r:
        raise r.error from r


def check_row(device, row: Row) -> CheckResult:
    """One row both ways: declared → a well-formed answer; undeclared → ``UnsupportedCall``."""
    caps: Capabilities = device.capabilities
    name, extra = f"capabilities/{row.name}", {"core": True} if row.core else {}
    unsent = not_sent(caps, name, "L0", extra)
    if unsent:
        return unsent
    declared = row.declared(caps)
    if declared is None:
        why = row.unchecked(caps) if row.unchecked else (f"declared max_vocab_size {caps.max_vocab_size} is above "
                                                          f"the {LARGEST_ALLOCATED_VOCAB} this group allocates")
        return CheckResult(name, "L0", "not_supported", why, extra=extra)
    try:
        call = row.call(caps)
    except MemoryError as e:
        return CheckResult(name, "L0", "not_supported", f"the call could not be built: {e}", extra=extra)
    if declared is EITHER:
        return _either(device, call, name, extra)
    if declared:
        lacking = sorted(n for n in call.needs if not _has(caps, n))
        if lacking:
            return CheckResult(name, "L0", "not_supported",
                               f"cannot be isolated: the call also needs {', '.join(lacking)}, undeclared", extra=extra)
    repro = f"specsim.conformance.checks.interface.capabilities.check_row(device, ROWS[{ROWS.index(row)}])"
    try:
        out = _invoke(device, call)
    except UnsupportedCall as e:
        if declared:
            return CheckResult(name, "L0", "fail", f"declares {row.name} but raised UnsupportedCall: {e} "
                               f"(a declared capability must be served; repro: {repro})", extra=extra)
        return CheckResult(name, "L0", "pass", f"undeclared; raised UnsupportedCall: {e}", extra=extra)
    except MutatedInput as e:
        return mutated_result(name, "L0", e, extra=extra)
    except WrongReturn as e:  # SPEC §7's output is not there at all: the check fails, naming what came back
        return CheckResult(name, "L0", "fail", f"{e} (repro: {repro})", extra=extra)
    except Exception as e:
        what = "a declared capability" if declared else "an undeclared capability must raise UnsupportedCall"
        return CheckResult(name, "L0", "fail", f"{what}: raised {type(e).__name__}: {e} (repro: {repro})\n"
                           f"{traceback.format_exc(limit=4)}", extra=extra)
    if not declared:
        return CheckResult(name, "L0", "fail", f"does not declare {row.name} but answered the call instead of "
                           f"raising UnsupportedCall (SPEC §10; repro: {repro})", extra=extra)
    problems = structure_problems(call.batch, out)
    return CheckResult(name, "L0", "fail" if problems else "pass",
                       "; ".join(problems) or "declared; answered a well-formed output", extra=extra)


def _either(device, call: Call, name: str, extra: dict) -> CheckResult:
    """A call beyond a limit the device never declared (SPEC §11.1's default): a refusal passes, and
    so does a well-formed answer; anything else fails."""
    try:
        out = _invoke(device, call)
    except UnsupportedCall as e:
        return CheckResult(name, "L0", "pass", f"limit undeclared; refused beyond SPEC's default: {e}", extra=extra)
    except Exception as e:
        return CheckResult(name, "L0", "fail", f"limit undeclared: refusing must raise UnsupportedCall; raised "
                           f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}", extra=extra)
    problems = structure_problems(call.batch, out) or _against_reference(device, call, out)
    return CheckResult(name, "L0", "fail" if problems else "pass",
                       "; ".join(problems) or "limit undeclared (a default is no declaration); served beyond "
                       "SPEC's default, as the reference does where the noise is known", extra=extra)


def _against_reference(device, call: Call, out) -> list[str]:
    """A tree served beyond an undeclared limit is held to the reference where its noise is known
    (injected, or Philox-keyed): serving it is allowed, serving it wrong is not."""
    if not isinstance(call.batch, TreeBatch) or (call.noise is None and device.capabilities.rng != "philox"):
        return []
    from specsim.testing.trees import compare_tree, reference_tree_step
    return compare_tree(out, reference_tree_step(call.batch, call.noise))


def capabilities_group(device, ctx) -> list[CheckResult]:
    """Every row of ``ROWS`` against ``device`` (``ctx`` unused: the calls are fixed)."""
    return [check_row(device, row) for row in ROWS]
