"""A request's SPEC §12 sampler in the engine: the step's ``SamplerParams`` and the processed row.

The engine carries §12's parameters per request (``SamplingParams``); each
request that uses one gets a ``RequestSampler`` (its parameters, the engine's
order profile, the ids ``min_tokens`` bans, its grammar's matcher). Two things
are built from it:

* ``sampler_params``: the ``VerifyBatch.sampler`` of one verify call — each
  request's prompt, its output so far (committed tokens only: the device adds
  this step's drafts row by row, SPEC §12) and, for grammar requests, one mask
  row per position along the drafts; requests without §12 parameters in the
  same call get neutral entries (repetition 1, penalties and bias 0, every
  token allowed), which change no logit;
* ``processed_row``: the law of one row after the same pipeline
  (``reference.sampler.sampler_rows``) — what a draft model drafts from, so its
  drafts are the ones the target keeps, and what ``sequence_law_given``
  enumerates for non-speculative sampling.

>>> from specsim.engine.state import SamplingParams
>>> s = RequestSampler.of(SamplingParams(repetition_penalty=2.0, temperature=0), order="canonical", eos_id=None)
>>> processed_row(s, np.array([1.0, 1.5, 0.0]), prompt=[1], output=[], mask=None).tolist()   # 1.5 / 2 < 1
[1.0, 0.0, 0.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from devices.protocol import SAMPLER_ORDERS, SamplerParams
from reference.sampler import sampler_rows
from specsim.engine.state import SamplingParams


@dataclass
class RequestSampler:
    """One request's §12 sampler: ``params``, the engine's ``order``, ``stop_ids`` (what ``min_tokens``
    bans: ``stop_token_ids`` and EOS unless ``ignore_eos``) and ``grammar`` (its ``GrammarState`` at the
    committed output, or None)."""

    params: SamplingParams
    order: str
    stop_ids: tuple
    grammar: object | None = None

    @classmethod
    def of(cls, params: SamplingParams, *, order: str, eos_id: int | None) -> "RequestSampler":
        if order not in SAMPLER_ORDERS:
            raise ValueError(f"sampler_order: must be one of {SAMPLER_ORDERS}, got {order!r}")
        eos = () if eos_id is None or params.ignore_eos else (eos_id,)
        grammar = None if params.grammar is None else params.grammar.start()
        return cls(params, order, tuple(dict.fromkeys(params.stop_token_ids + eos)), grammar)


_NEUTRAL = SamplingParams()


def sampler_params(entries: Sequence[tuple], vocab_size: int, order: str) -> SamplerParams | None:
    """The ``SamplerParams`` of one verify call, or None when no request uses §12 (SPEC §2's step).

    ``entries``: per request ``(sampler: RequestSampler | None, prompt, output, num_drafts, mask)``,
    ``mask`` ``[num_drafts + 1, V]`` bool (its rows along the drafts) or None (every token allowed). A
    field is given only when some request uses it (a device need declare only those).
    """
    if all(s is None for s, *_ in entries):
        return None
    params = [_NEUTRAL if s is None else s.params for s, *_ in entries]
    ids = lambda values: np.asarray(values, np.int64)  # noqa: E731
    fields: dict = {"order": order, "output_token_ids": tuple(ids(out) for _, _, out, _, _ in entries)}
    if any(p.repetition_penalty != 1 for p in params):
        fields["repetition_penalty"] = np.array([p.repetition_penalty for p in params], np.float64)
        fields["prompt_token_ids"] = tuple(ids(prompt) for _, prompt, _, _, _ in entries)
    for name in ("frequency_penalty", "presence_penalty", "min_p"):
        if any(getattr(p, name) != 0 for p in params):
            fields[name] = np.array([getattr(p, name) for p in params], np.float64)
    if any(p.allowed_token_ids is not None for p in params):
        fields["allowed_token_ids"] = tuple(None if p.allowed_token_ids is None else ids(p.allowed_token_ids)
                                            for p in params)
    if any(p.bad_words for p in params):
        fields["bad_words"] = tuple(tuple(ids(w) for w in p.bad_words or ()) for p in params)
    if any(p.min_tokens > 0 for p in params):
        fields["min_tokens"] = np.array([p.min_tokens for p in params], np.int64)
        fields["stop_token_ids"] = tuple(ids(() if s is None else s.stop_ids) for s, *_ in entries)
    if any(p.logit_bias for p in params):
        bias = np.zeros((len(params), vocab_size))
        for i, p in enumerate(params):
            for token, b in p.logit_bias or ():
                bias[i, token] += b
        fields["logit_bias"] = bias
    if any(mask is not None for *_, mask in entries):
        fields["token_mask"] = np.concatenate([
            np.ones((k + 1, vocab_size), bool) if mask is None else np.asarray(mask, bool) for *_, k, mask in entries])
    return SamplerParams(**fields)


def processed_row(sampler: RequestSampler, logits: np.ndarray, *, prompt: Sequence[int], output: Sequence[int],
                  mask: np.ndarray | None, temperature: float | None = None, top_k: int | None = None,
                  top_p: float | None = None) -> np.ndarray:
    """The law ``[V]`` of one row: ``logits`` ``[V]`` through the request's §12 pipeline after ``prompt``
    and ``output`` (everything before the row: committed tokens and drafts), with ``mask`` ``[V]`` bool
    (or None); temperature, top-k and top-p the request's unless given (a drafter passes top-k 0,
    top-p 1). Temperature 0: the one-hot argmax of the processed logits."""
    p = sampler.params
    sp = sampler_params([(sampler, prompt, output, 0, None if mask is None else np.asarray(mask)[None])],
                        len(logits), sampler.order)
    return sampler_rows(np.asarray(logits, np.float64)[None], [0], np.zeros(0, np.int64),
                        [p.temperature if temperature is None else temperature],
                        [p.top_k if top_k is None else top_k], [p.top_p if top_p is None else top_p],
                        **sp.as_kwargs())[0]


__all__ = ["RequestSampler", "sampler_params", "processed_row"]
