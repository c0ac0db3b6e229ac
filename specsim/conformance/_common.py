"""What the groups share: capability gating, calling the device, and judging its refusals.

A device may refuse a call (``UnsupportedCall``) only outside what it declares (SPEC §10). Every
group calls the device through ``ask`` (directly or via ``formed``/``call``), which turns a
refusal into ``Refusal`` carrying the call; ``refused`` then judges it from the call itself with
``devices.validate.check_call`` / ``check_tree_call``: a call those refuse for the declaration is
``not_supported``; any other refusal — a batch size (never a declared limit), a V within
``max_vocab_size``, a declared mode — is a ``fail`` naming the declaration it contradicts.
"""

from __future__ import annotations

import re
import traceback

import numpy as np

from devices.validate import as_chain_batch, check_call, check_tree_call
from devices.protocol import Capabilities, InvalidInput, TreeBatch, UnsupportedCall
from specsim.conformance.results import CheckResult
from specsim.judge.compare import output_problems, returned_type_problem


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


class Refusal(Exception):
    """The device raised ``UnsupportedCall`` for one call: the error, and the call (``batch``, a
    ``VerifyBatch`` or ``TreeBatch``, and ``noise``) that ``refused`` judges against the declaration.
    ``what`` names a call that is not ``batch`` itself (``verify_repeated`` of ``batch`` tiled)."""

    def __init__(self, error: UnsupportedCall, batch, noise=None, what: str = ""):
        super().__init__(error, batch, noise, what)
        self.error, self.batch, self.noise, self.what = error, batch, noise, what

    def __str__(self) -> str:
        return f"the device refused {self.what or 'a call'}: UnsupportedCall: {self.error}"


class WrongReturn(Exception):
    """``verify`` (``verify_tree``) returned something that is no ``VerifyOutput`` (``TreeOutput``): the message
    names the type; a check through ``call`` fails with it."""


def ask(device, batch, noise=None):
    """``device.verify(batch, noise)`` (``verify_tree`` for a ``TreeBatch``); a refusal is raised
    again as ``Refusal`` carrying the call, so that the group can judge it (``refused``); a return value
    that is no ``VerifyOutput`` (``TreeOutput``) raises ``WrongReturn`` naming its type."""
    tree = isinstance(batch, TreeBatch)
    try:
        out = device.verify_tree(batch, noise) if tree else device.verify(batch, noise)
    except UnsupportedCall as e:
        raise Refusal(e, batch, noise) from e
    problem = returned_type_problem(out, *(("verify_tree", "TreeOutput") if tree else ("verify", "VerifyOutput")))
    if problem:
        raise WrongReturn(problem)
    return out


def outside_declaration(caps: Capabilities | None, batch, noise=None) -> str | None:
    """Why the call lies outside what ``caps`` declare — the ``UnsupportedCall`` that
    ``check_call`` (``check_tree_call`` for a tree) raises for it — or None: it is inside, and the
    device must serve it. Batch size is never a declared limit. ``InvalidInput`` (the call breaks
    SPEC §6's input rules) propagates: such a call is no question of the declaration."""
    if caps is None:
        return "the device declares no capabilities"
    try:
        if isinstance(batch, TreeBatch):
            check_tree_call(batch, noise, caps)
        else:
            check_call(batch, noise, caps)
    except UnsupportedCall as e:
        return str(e)
    return None


def refused(name: str, layer: str, refusal: Refusal, caps: Capabilities | None, **fields) -> CheckResult:
    """A refusal as check ``name``'s result (SPEC §10): ``not_supported`` for a call outside the
    declaration (naming the declared limit it passes), ``fail`` for one inside it (naming the
    declaration it contradicts), ``error`` if the call itself broke SPEC §6 (the check's fault).
    ``fields``: more ``CheckResult`` fields (``seed``, ``n``, ``extra``)."""
    said = f"UnsupportedCall: {refusal.error}" + (f" (from {refusal.what})" if refusal.what else "")
    try:
        outside = outside_declaration(caps, refusal.batch, refusal.noise)
    except InvalidInput as e:
        return CheckResult(name, layer, "error", f"the device refused ({said}) a call that breaks SPEC §6 ({e}): "
                           "the check built an invalid call, so the refusal cannot be judged", **fields)
    if outside is not None:
        return CheckResult(name, layer, "not_supported", f"device raised {said}; the call is outside its "
                           f"declaration ({outside})", **fields)
    return CheckResult(name, layer, "fail", f"device refused a call inside its declaration "
                       f"({declaration_against(caps, refusal.batch, refusal.noise, str(refusal.error))}): {said}. "
                       "UnsupportedCall is for calls outside the declared capabilities (SPEC §10): serve the call, "
                       "or declare the limit it passes", **fields)


_HINTS = {"V": r"vocab|\bV\b", "K": r"max_k|num_draft|depth|\bK\b", "dtype": r"dtype|float|bf16|fp16",
          "nodes": r"node", "tree": r"tree|scheme", "modes": r"greedy|draft_probs|point|top_k|top_p|noise|rng|sampler",
          "batch": r"batch|request"}


def declaration_against(caps: Capabilities, batch, noise, said: str = "") -> str:
    """The declaration a call inside it meets, limit by limit, against the call's own figures —
    those the refusal's message ``said`` mentions first.

    >>> import numpy as np
    >>> from devices.protocol import VerifyBatch
    >>> caps = Capabilities(injected_noise=True, rng="none", max_vocab_size=262144)
    >>> b = VerifyBatch(np.array([2]), np.array([1, 2]), None, np.zeros((3, 301), np.float32),
    ...                 np.ones(1), np.zeros(1, np.int64), np.ones(1))
    >>> declaration_against(caps, b, None, "V <= 300 (got 301)").split("; ")[0]
    'max_vocab_size=262144, V=301'
    """
    tree = isinstance(batch, TreeBatch)
    chain = as_chain_batch(batch) if tree else batch
    depth = int(batch.depths().max(initial=0)) if tree else batch.max_k
    parts = {"V": f"max_vocab_size={caps.max_vocab_size}, V={batch.vocab_size}",
             "K": f"max_k={caps.max_k}, {'tree depth' if tree else 'K'}={depth}",
             "dtype": f"dtypes={'/'.join(caps.dtypes)}, dtype={batch.target_logits.dtype.name}"}
    if tree:
        parts["nodes"] = (f"max_tree_nodes={caps.max_tree_nodes}, "
                          f"nodes={int(np.asarray(batch.num_nodes).max(initial=0))} in the largest request")
        parts["tree"] = (f"tree_schemes={'/'.join(caps.tree_schemes)}, "
                         f"needs {'/'.join(sorted(batch.schemes_needed()))}")
    parts["modes"] = "declared modes used: " + ", ".join(_modes_used(chain, noise, caps))
    parts["batch"] = f"B={batch.batch_size}: batch size is never a declared limit"
    first = [k for k, pattern in _HINTS.items() if k in parts and re.search(pattern, said)]
    return "; ".join(parts[k] for k in first + [k for k in parts if k not in first])


def _modes_used(batch, noise, caps: Capabilities) -> list[str]:
    temperature = np.asarray(batch.temperature)
    sampled = temperature > 0
    top_k = np.asarray(batch.top_k)
    used = ["greedy"] * bool((~sampled).any()) + ["temperature"] * bool(sampled.any())
    used.append("draft_probs" if batch.draft_probs is not None else "point_proposals")
    used += ["top_k"] * bool((sampled & (top_k > 0) & (top_k < batch.vocab_size)).any())
    used += ["top_p"] * bool((sampled & (np.asarray(batch.top_p) < 1)).any())
    used.append("injected_noise" if noise is not None else f"rng={caps.rng}")
    if getattr(batch, "sampler", None) is not None and batch.sampler.given():
        used.append(f"sampler {'/'.join(batch.sampler.given())} (order {batch.sampler.order})")
    return used


def call(name: str, layer: str, fn, caps: Capabilities | None):
    """Run ``fn()`` (which calls the device through ``ask`` or ``formed``): ``(its value, None)``, or
    ``(None, result)``: a ``Refusal`` judged by ``refused``, any other exception an ``error``."""
    try:
        return fn(), None
    except Malformed:  # not a crash: the group turns it into its failing well-formed-output check
        raise
    except Refusal as r:
        return None, refused(name, layer, r, caps)
    except WrongReturn as e:  # SPEC §7's output is not there at all: the check fails, naming what came back
        return None, CheckResult(name, layer, "fail", str(e))
    except UnsupportedCall as e:  # not through ``ask``: the call it refused is unknown, so nothing can be judged
        return None, CheckResult(name, layer, "error", f"UnsupportedCall from a call the check did not record "
                                 f"({e}): whether it was inside the declaration cannot be told\n"
                                 f"{traceback.format_exc(limit=6)}")
    except Exception as e:
        return None, CheckResult(name, layer, "error", f"device raised {type(e).__name__}: {e}\n"
                                 f"{traceback.format_exc(limit=6)}")


class Malformed(Exception):
    """A device's output broke SPEC §7 (shape, range, padding): the group reports a failing check."""


def formed(device, batch, noise=None):
    """``ask(device, batch, noise)``, or ``Malformed`` naming what is wrong with its output."""
    out = ask(device, batch, noise)
    problems = output_problems(batch, out)
    if problems:
        raise Malformed(f"batch of {batch.batch_size} request(s), V={batch.vocab_size}: " + "; ".join(problems))
    return out


def malformed_result(layer: str, e: Malformed) -> CheckResult:
    return CheckResult(f"{layer}/well-formed-output", layer, "fail", f"malformed output (SPEC §7): {e}")
