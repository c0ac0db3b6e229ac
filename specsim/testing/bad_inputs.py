"""One bad call per rule of SPEC §6 (with §12.4's sampler rules and §4's withdrawn drafts, and
§11.6 for trees), each naming the argument the error must name.

>>> chain = [b for b in BAD_INPUTS if b not in SAMPLER_BAD_INPUTS and b not in WITHDRAWN_BAD_INPUTS]
>>> len(chain) >= 20, len(TREE_BAD_INPUTS) == len(chain) + 12
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from devices.protocol import Noise, SamplerParams, TreeBatch, VerifyBatch


def good_batch() -> tuple[VerifyBatch, Noise]:
    """A small valid batch (K = [2, 0], V = 4, draft probs) and valid noise."""
    rows = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]])
    batch = VerifyBatch(num_draft_tokens=np.array([2, 0]), draft_token_ids=np.array([3, 1]), draft_probs=rows,
                        target_logits=np.zeros((4, 4)), temperature=np.array([1.0, 0.7]),
                        top_k=np.array([0, 2]), top_p=np.array([1.0, 0.9]),
                        seeds=np.array([1, 2], np.uint64), positions=np.array([5, 9]))
    return batch, Noise(np.array([0.3, 0.6]), np.ones((2, 4)))


@dataclass(frozen=True)
class BadInput:
    rule: str
    argument: str                       # the name the error message must contain
    make: Callable[[], tuple]           # -> (batch, noise)
    needs: frozenset = frozenset()      # capabilities of the call's mode: a device lacking one may refuse it
                                        # with UnsupportedCall instead (it cannot serve the mode at all)


def _b(**changes) -> Callable[[], tuple]:
    def make():
        batch, noise = good_batch()
        return replace(batch, **changes), noise
    return make


def _n(**changes) -> Callable[[], tuple]:
    def make():
        batch, noise = good_batch()
        return batch, replace(noise, **changes)
    return make


def _logits(fill) -> Callable[[], tuple]:
    def make():
        batch, noise = good_batch()
        logits = batch.target_logits.copy()
        fill(logits)
        return replace(batch, target_logits=logits), noise
    return make


def _probs(fill) -> Callable[[], tuple]:
    def make():
        batch, noise = good_batch()
        probs = batch.draft_probs.copy()
        fill(probs)
        return replace(batch, draft_probs=probs), noise
    return make


def _set(index, value):
    def fill(a):
        a[index] = value
    return fill


BAD_INPUTS: list[BadInput] = [
    BadInput("empty batch", "num_draft_tokens", _b(num_draft_tokens=np.zeros(0, np.int64), draft_token_ids=np.zeros(0, np.int64),
                                                  draft_probs=np.zeros((0, 4)), target_logits=np.zeros((0, 4)),
                                                  temperature=np.zeros(0), top_k=np.zeros(0, np.int64), top_p=np.zeros(0),
                                                  seeds=np.zeros(0, np.uint64), positions=np.zeros(0, np.int64))),
    BadInput("negative K", "num_draft_tokens", _b(num_draft_tokens=np.array([3, -1]))),
    BadInput("K not integer", "num_draft_tokens", _b(num_draft_tokens=np.array([2.0, 0.0]))),
    BadInput("draft ids length differs from sum(K)", "draft_token_ids", _b(draft_token_ids=np.array([3]))),
    BadInput("draft id >= V", "draft_token_ids", _b(draft_token_ids=np.array([3, 4]))),
    BadInput("negative draft id that is not the placeholder", "draft_token_ids", _b(draft_token_ids=np.array([-2, 1]))),
    BadInput("float draft ids", "draft_token_ids", _b(draft_token_ids=np.array([3.0, 1.0]))),
    BadInput("draft probs wrong shape", "draft_probs", _b(draft_probs=np.full((2, 3), 1 / 3))),
    BadInput("draft probs negative", "draft_probs", _probs(_set((0, slice(None)), [-0.1, 0.4, 0.3, 0.4]))),
    BadInput("draft probs unnormalised", "draft_probs", _probs(_set((1, slice(None)), [0.2, 0.2, 0.2, 0.3]))),
    BadInput("draft probs NaN", "draft_probs", _probs(_set((0, 0), np.nan))),
    BadInput("draft probs dtype differs from target logits", "draft_probs",
             lambda: (replace(good_batch()[0], draft_probs=good_batch()[0].draft_probs.astype(np.float32)), good_batch()[1])),
    BadInput("target logits NaN", "target_logits", _logits(_set((1, 2), np.nan))),
    BadInput("target logits +inf", "target_logits", _logits(_set((0, 0), np.inf))),
    BadInput("target logits row all -inf", "target_logits", _logits(_set((2, slice(None)), -np.inf))),
    BadInput("target logits wrong number of rows", "target_logits", _b(target_logits=np.zeros((3, 4)))),
    BadInput("target logits integer dtype", "target_logits", _b(target_logits=np.zeros((4, 4), np.int64))),
    BadInput("temperature negative", "temperature", _b(temperature=np.array([-0.5, 1.0]))),
    BadInput("temperature NaN", "temperature", _b(temperature=np.array([np.nan, 1.0]))),
    BadInput("temperature wrong length", "temperature", _b(temperature=np.array([1.0]))),
    BadInput("top_k negative", "top_k", _b(top_k=np.array([-1, 0]))),
    BadInput("top_p zero", "top_p", _b(top_p=np.array([0.0, 1.0]))),
    BadInput("top_p above one", "top_p", _b(top_p=np.array([1.5, 1.0]))),
    BadInput("positions negative", "positions", _b(positions=np.array([-1, 0]))),
    BadInput("uniforms equal to 1", "uniforms", _n(uniforms=np.array([1.0, 0.5]))),
    BadInput("uniforms wrong length", "uniforms", _n(uniforms=np.array([0.5]))),
    BadInput("exponentials zero", "exponentials", _n(exponentials=np.zeros((2, 4)))),
    BadInput("exponentials infinite", "exponentials", _n(exponentials=np.full((2, 4), np.inf))),
]
"""Each rule of SPEC §6 with the argument its error must name."""

# --- SPEC §12.4: the sampler parameters' rules (good_batch: K = [2, 0], drafts [3, 1], V = 4, 4 target rows) ---

def _s(**fields) -> Callable[[], tuple]:
    def make():
        batch, noise = good_batch()
        return replace(batch, sampler=SamplerParams(**fields)), noise
    return make


def _ids(*lists) -> tuple:
    return tuple(None if ids is None else np.array(ids, dtype=np.int64) for ids in lists)


SAMPLER_BAD_INPUTS: list[BadInput] = [
    BadInput("sampler order not a profile", "order", _s(order="hf", min_p=np.array([0.1, 0.1]))),
    BadInput("prompt ids not one entry per request", "prompt_token_ids",
             _s(prompt_token_ids=_ids([1]), repetition_penalty=np.array([1.2, 1.2]))),
    BadInput("output ids holding V", "output_token_ids",
             _s(output_token_ids=_ids([1], [4]), presence_penalty=np.array([0.5, 0.5]))),
    BadInput("allowed ids holding -1", "allowed_token_ids", _s(allowed_token_ids=_ids([-1, 2], None))),
    BadInput("allowed ids empty", "allowed_token_ids", _s(allowed_token_ids=_ids([], None))),
    BadInput("stop ids not integer", "stop_token_ids",
             _s(stop_token_ids=(np.array([1.0]), np.array([2.0])), min_tokens=np.array([1, 1]))),
    BadInput("bad word holding V", "bad_words", _s(bad_words=((np.array([0, 4]),), ()))),
    BadInput("bad word empty", "bad_words", _s(bad_words=((np.zeros(0, np.int64),), ()))),
    BadInput("min_tokens negative", "min_tokens", _s(min_tokens=np.array([-1, 0]), stop_token_ids=_ids([0], [0]))),
    BadInput("min_tokens not integer", "min_tokens", _s(min_tokens=np.array([1.5, 0.0]), stop_token_ids=_ids([0], [0]))),
    BadInput("token mask not bool", "token_mask", _s(token_mask=np.ones((4, 4)))),
    BadInput("token mask wrong shape", "token_mask", _s(token_mask=np.ones((3, 4), bool))),
    BadInput("token mask row allowing nothing", "token_mask",
             _s(token_mask=np.array([[1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]], bool))),
    BadInput("mask and allowed ids leaving a row empty", "token_mask",
             _s(token_mask=np.array([[1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 1, 1], [1, 1, 0, 1]], bool),
                allowed_token_ids=_ids(None, [2]))),
    BadInput("bad word completed by the drafts emptying a row", "token_mask",
             _s(allowed_token_ids=_ids([1], None), bad_words=((np.array([3, 1]),), ()))),
    BadInput("min_tokens emptying a row", "token_mask",
             _s(allowed_token_ids=_ids([0, 2], None), stop_token_ids=_ids([0, 2], None), min_tokens=np.array([3, 0]))),
    BadInput("logit bias wrong shape", "logit_bias", _s(logit_bias=np.zeros((2, 3)))),
    BadInput("logit bias NaN", "logit_bias", _s(logit_bias=np.array([[0, np.nan, 0, 0], [0, 0, 0, 0]]))),
    BadInput("logit bias infinite", "logit_bias", _s(logit_bias=np.array([[0, 0, 0, 0], [-np.inf, 0, 0, 0]]))),
    BadInput("repetition penalty zero", "repetition_penalty", _s(repetition_penalty=np.array([1.2, 0.0]))),
    BadInput("repetition penalty negative", "repetition_penalty", _s(repetition_penalty=np.array([-1.0, 1.0]))),
    BadInput("repetition penalty infinite", "repetition_penalty", _s(repetition_penalty=np.array([np.inf, 1.0]))),
    BadInput("repetition penalty wrong length", "repetition_penalty", _s(repetition_penalty=np.array([1.1]))),
    BadInput("frequency penalty NaN", "frequency_penalty", _s(frequency_penalty=np.array([np.nan, 0.0]))),
    BadInput("presence penalty infinite", "presence_penalty", _s(presence_penalty=np.array([0.0, np.inf]))),
    BadInput("min_p above one", "min_p", _s(min_p=np.array([0.1, 1.5]))),
    BadInput("min_p negative", "min_p", _s(min_p=np.array([-0.1, 0.0]))),
    BadInput("min_p NaN", "min_p", _s(min_p=np.array([np.nan, 0.0]))),
]
"""Each rule of SPEC §12.4 with the argument its error must name (rows: SPEC §12.4's empty-row error)."""

BAD_INPUTS += SAMPLER_BAD_INPUTS

NO_NOISE_WITHOUT_SEEDS = BadInput("no noise and no seeds", "seeds",
                                  lambda: (replace(good_batch()[0], seeds=None), None))
"""Only for devices that draw their own randomness."""


# --- SPEC §11.6: the tree step's input rules ----------------------------------------------------

def good_tree_batch() -> tuple[TreeBatch, Noise]:
    """A small valid tree batch (request 0: a → c and b under the root; request 1: no node; V = 4,
    draft rows, scheme rrs) and valid noise (a coin per node)."""
    rows = np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25], [0.4, 0.3, 0.2, 0.1]])
    batch = TreeBatch(num_nodes=np.array([3, 0]), parents=np.array([-1, -1, 0]), draft_token_ids=np.array([3, 1, 2]),
                      draft_probs=rows, target_logits=np.zeros((5, 4)), temperature=np.array([1.0, 0.7]),
                      top_k=np.array([0, 2]), top_p=np.array([1.0, 0.9]), seeds=np.array([1, 2], np.uint64),
                      positions=np.array([5, 9]))
    return batch, Noise(np.array([0.3, 0.6, 0.9]), np.ones((2, 4)))


def _tree_of(bad: BadInput) -> BadInput:
    """The chain rule ``bad`` (SPEC §6) stated on a tree batch: ``num_nodes`` for ``num_draft_tokens``,
    the chain's drafts as the nodes of a chain (``parents`` valid for the good batch's 2 drafts)."""
    def make():
        chain, noise = bad.make()
        tree = TreeBatch(chain.num_draft_tokens, np.array([-1, 0]), chain.draft_token_ids, chain.draft_probs,
                         chain.target_logits, chain.temperature, chain.top_k, chain.top_p, chain.seeds, chain.positions)
        return tree, noise
    argument = "num_nodes" if bad.argument == "num_draft_tokens" else bad.argument
    return BadInput(f"tree {bad.rule}".replace("sum(K)", "sum(num_nodes)"), argument, make)


def _t(**changes) -> Callable[[], tuple]:
    def make():
        batch, noise = good_tree_batch()
        return replace(batch, **changes), noise
    return make


TREE_BAD_INPUTS: list[BadInput] = [_tree_of(bad) for bad in BAD_INPUTS if bad not in SAMPLER_BAD_INPUTS] + [
    BadInput("tree parents float", "parents", _t(parents=np.array([-1.0, -1.0, 0.0]))),
    BadInput("tree parents 2-D", "parents", _t(parents=np.array([[-1, -1, 0]]))),
    BadInput("tree parents length differs from sum(num_nodes)", "parents", _t(parents=np.array([-1, -1]))),
    BadInput("tree parent below -1", "parents", _t(parents=np.array([-1, -2, 0]))),
    BadInput("tree parent is the node itself", "parents", _t(parents=np.array([-1, 1, 0]))),
    BadInput("tree parent is a later node", "parents", _t(parents=np.array([-1, 2, 0]))),
    BadInput("tree scheme unknown", "scheme", _t(scheme="eagle")),
    BadInput("tree sglang with draft probs", "draft_probs", _t(scheme="sglang")),
    BadInput("tree threshold_single negative", "threshold_single", _t(threshold_single=-0.1)),
    BadInput("tree threshold_single above one", "threshold_single", _t(threshold_single=1.5)),
    BadInput("tree threshold_acc above one", "threshold_acc", _t(threshold_acc=1.01)),
    BadInput("tree threshold_acc NaN", "threshold_acc", _t(threshold_acc=float("nan"))),
]
"""Every rule of SPEC §11.6: §6's with ``num_nodes`` for ``num_draft_tokens`` (a tree batch takes no
§12 parameters, so §12.4's rules are not restated), then the tree's own;
each must be refused by ``verify_tree`` with a ``ValueError`` naming the argument."""

TREE_NO_NOISE_WITHOUT_SEEDS = BadInput("tree no noise and no seeds", "seeds",
                                       lambda: (replace(good_tree_batch()[0], seeds=None), None))
"""Only for tree devices that draw their own randomness."""


# --- SPEC §4's withdrawn drafts (VerifyBatch.withdrawn) -------------------------------------------

def _withdrawn(mask, ids=(-1, 1), **changes) -> Callable[[], tuple]:
    """The good batch with draft ids ``ids`` and ``withdrawn=mask`` (plus ``changes``)."""
    def make():
        batch, noise = good_batch()
        return replace(batch, draft_token_ids=np.array(ids), withdrawn=mask, **changes), noise
    return make


def _withdrawn_row(fill) -> Callable[[], tuple]:
    """Draft 0 withdrawn, its draft row changed by ``fill`` (a withdrawn draft's row is read)."""
    def make():
        batch, noise = _withdrawn(np.array([True, False]))()
        probs = batch.draft_probs.copy()
        fill(probs)
        return replace(batch, draft_probs=probs), noise
    return make


WITHDRAWN = frozenset({"withdrawn_drafts"})

WITHDRAWN_BAD_INPUTS: list[BadInput] = [
    BadInput("withdrawn not bool", "withdrawn", _withdrawn(np.array([1, 0])), WITHDRAWN),
    BadInput("withdrawn wrong length", "withdrawn", _withdrawn(np.array([True])), WITHDRAWN),
    BadInput("withdrawn draft with a token id", "withdrawn", _withdrawn(np.array([True, False]), ids=(3, 1)), WITHDRAWN),
    BadInput("withdrawn point proposal", "withdrawn", _withdrawn(np.array([True, False]), draft_probs=None),
             WITHDRAWN | {"point_proposals"}),
    BadInput("withdrawn draft row unnormalised", "draft_probs", _withdrawn_row(_set((0, slice(None)), [0.2, 0.2, 0.2, 0.3])),
             WITHDRAWN),
    BadInput("withdrawn draft row NaN", "draft_probs", _withdrawn_row(_set((0, 1), np.nan)), WITHDRAWN),
]
"""SPEC §6 on ``withdrawn``: a bool mask of ``num_tokens`` marking placeholder ids only, with the rows it
makes read (``draft_probs`` given, each a probability row)."""

BAD_INPUTS += WITHDRAWN_BAD_INPUTS
