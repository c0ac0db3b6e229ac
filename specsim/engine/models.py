"""Toy language models: deterministic, cheap, exactly enumerable.

A ``ToyLM`` is a fixed function of the last ``order`` tokens of its context:
the context's *key* (a rolling base-``V+1`` number of those tokens, with the
pad symbol ``V`` on the left of short contexts) indexes a logits table. No
floating-point arithmetic happens at lookup time, so a row's logits are
bit-identical whatever the batch it is computed in — the engine's batch
invariance rests on that.

The target also exposes a **hidden feature** per position (``hidden_at``):
coordinate 0 is the context key (the state an EAGLE head would regress), the
rest a random embedding. ``EagleProposer`` drafts from the feature plus the
last token, never from the token history — so a stale or misplaced feature
shows up as lost acceptance, as in real EAGLE bugs.

>>> target = ToyLM(vocab_size=3, order=2, seed=1)
>>> target.next_logits([0, 2]).shape
(3,)
>>> draft = target.mixed(closeness=1.0, seed=9)      # a perfect drafter
>>> bool((draft.next_logits([0, 2]) == target.next_logits([0, 2])).all())
True
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

_HASH_MULT = np.uint64(0x9E3779B97F4A7C15)


class ModelPositionError(IndexError):
    """A model was asked for a position at or beyond its ``max_position``."""


class ToyLM:
    """Logits are ``table[index(key(last order tokens))]``.

    - ``vocab_size`` V; ``order`` n ≥ 0 (0: context-free); ``eos_id`` or None.
    - ``max_position``: the model refuses to predict a token at a position
      ``≥ max_position`` (a rope cache's end), raising ``ModelPositionError``.
    - ``table_size``: rows of the logits table; when ``(V+1)**n`` fits, keys
      index it exactly (no collisions — what exact enumeration wants),
      otherwise keys are hashed into it.
    - ``scale``: standard deviation of the logits (sharpness of the law).
    """

    def __init__(self, vocab_size: int, order: int = 2, seed: int = 0, *, eos_id: int | None = None,
                 max_position: int = 1 << 30, table_size: int = 4096, scale: float = 2.0,
                 hidden_size: int = 4, table: np.ndarray | None = None):
        if vocab_size < 1:
            raise ValueError(f"vocab_size: must be >= 1, got {vocab_size}")
        if order < 0:
            raise ValueError(f"order: must be >= 0, got {order}")
        if eos_id is not None and not 0 <= eos_id < vocab_size:
            raise ValueError(f"eos_id: must be in [0, {vocab_size}), got {eos_id}")
        self.vocab_size, self.order, self.eos_id = vocab_size, order, eos_id
        self.max_position, self.seed, self.scale = max_position, seed, scale
        self.base = vocab_size + 1  # digit V is the left pad
        self.modulus = self.base ** order
        if self.modulus > 2**53:  # keys travel in float64 hidden features: keep them exact
            raise ValueError(f"order: (V+1)**order must stay <= 2**53, got {self.base}**{order}")
        self.exact = self.modulus <= table_size
        rows = self.modulus if self.exact else table_size
        rng = np.random.default_rng([seed, vocab_size, order])  # a local generator; the global one is never touched
        self.table = (rng.standard_normal((rows, vocab_size)) * scale) if table is None else np.asarray(table, np.float64)
        if self.table.shape != (rows, vocab_size):
            raise ValueError(f"table: must have shape {(rows, vocab_size)}, got {self.table.shape}")
        self.features = rng.standard_normal((rows, hidden_size))
        self.pad_key = self.modulus - 1  # all-pad context: the key of an empty history

    # -- keys ---------------------------------------------------------------
    def key_of(self, tokens: Sequence[int]) -> int:
        """Key of a context (its last ``order`` tokens, left-padded)."""
        key = self.pad_key
        for t in list(tokens)[max(0, len(tokens) - self.order):]:
            key = (key * self.base + int(t)) % self.modulus
        return key

    def keys_of(self, windows: np.ndarray) -> np.ndarray:
        """Keys of ``windows`` ``[rows, order]`` int64 (pad = V) → ``[rows]`` int64."""
        key = np.zeros(len(windows), np.int64)
        for m in range(self.order):
            key = key * self.base + windows[:, m]
        return key

    def roll(self, keys: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Keys ``[rows]`` of the contexts extended by ``tokens`` ``[rows]``."""
        if self.order == 0:
            return np.zeros_like(keys)
        return (keys * self.base + tokens) % self.modulus

    def index(self, keys: np.ndarray) -> np.ndarray:
        if self.exact:
            return keys
        h = (keys.astype(np.uint64) * _HASH_MULT) >> np.uint64(40)
        return (h % np.uint64(len(self.table))).astype(np.int64)

    # -- outputs ------------------------------------------------------------
    def _check_positions(self, positions: np.ndarray | None) -> None:
        if positions is not None and len(positions) and int(np.max(positions)) >= self.max_position:
            raise ModelPositionError(f"position {int(np.max(positions))} is at or beyond this model's "
                                     f"max_position {self.max_position}")

    def logits_at(self, keys: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
        """Logits ``[rows, V]`` predicting the token at ``positions`` ``[rows]`` after contexts ``keys``."""
        self._check_positions(positions)
        return self.table[self.index(keys)]

    def hidden_at(self, keys: np.ndarray) -> np.ndarray:
        """Hidden features ``[rows, 1 + hidden_size]``: coordinate 0 is the key (exact in float64)."""
        return np.concatenate([keys[:, None].astype(np.float64), self.features[self.index(keys)]], axis=1)

    def next_logits(self, tokens: Sequence[int]) -> np.ndarray:
        """Logits ``[V]`` of the token following ``tokens``."""
        return self.logits_at(np.array([self.key_of(tokens)]), np.array([len(tokens)]))[0]

    def greedy_chain(self, prompt: Sequence[int], max_tokens: int, max_model_len: int = 1 << 30) -> list[int]:
        """The non-speculative greedy output, from the model alone (no engine): the oracle of the
        greedy properties. Stops at ``max_tokens``, at ``max_model_len`` or after EOS."""
        out: list[int] = []
        while len(out) < max_tokens and len(prompt) + len(out) < max_model_len:
            out.append(int(np.argmax(self.next_logits(list(prompt) + out))))
            if out[-1] == self.eos_id:
                break
        return out

    # -- derived models -----------------------------------------------------
    def mixed(self, closeness: float, seed: int, *, max_position: int | None = None) -> "ToyLM":
        """A drafter: logits ``closeness·target + (1 − closeness)·independent`` on the same keys."""
        if not 0.0 <= closeness <= 1.0:
            raise ValueError(f"closeness: must be in [0, 1], got {closeness}")
        other = ToyLM(self.vocab_size, self.order, seed, table_size=len(self.table), scale=self.scale)
        table = closeness * self.table + (1.0 - closeness) * other.table
        return ToyLM(self.vocab_size, self.order, seed, eos_id=self.eos_id,
                     max_position=self.max_position if max_position is None else max_position,
                     table_size=len(self.table), scale=self.scale, table=table)

    @classmethod
    def constant(cls, logits: Sequence[float], **kw) -> "ToyLM":
        """A context-free model whose every row is ``logits`` ``[V]`` (synthetic i.i.d. acceptance)."""
        row = np.asarray(logits, np.float64)
        return cls(len(row), order=0, table=row[None, :], **kw)

    # -- exact law ----------------------------------------------------------
    def sequence_law(self, prompt: Sequence[int], max_tokens: int, probs_fn: Callable[[np.ndarray], np.ndarray],
                     *, max_model_len: int | None = None) -> dict[tuple[int, ...], float]:
        """Exact law of the generated continuation, by enumeration.

        Generation stops after ``max_tokens`` tokens, at EOS (kept), or when
        the sequence reaches ``max_model_len``. ``probs_fn`` maps logits
        ``[V]`` to the sampling law ``[V]`` (e.g. ``reference.target.target_probs``).

        >>> lm = ToyLM.constant([0.0, 0.0])
        >>> lm.sequence_law([0], 2, lambda z: np.exp(z) / np.exp(z).sum())[(1, 1)]
        0.25
        """
        limit = max_tokens if max_model_len is None else min(max_tokens, max_model_len - len(prompt))
        law: dict[tuple[int, ...], float] = {}

        def walk(out: tuple[int, ...], prob: float) -> None:
            if len(out) >= limit or (out and out[-1] == self.eos_id):
                law[out] = law.get(out, 0.0) + prob
                return
            row = probs_fn(self.next_logits(list(prompt) + list(out)))
            for v in np.flatnonzero(row > 0):
                walk(out + (int(v),), prob * float(row[v]))

        walk((), 1.0)
        return law

    def sequence_law_given(self, prompt: Sequence[int], params, *, order: str = "canonical",
                           max_model_len: int | None = None) -> dict[tuple[int, ...], float]:
        """Exact law of the continuation under NON-speculative sampling with ``params`` (a
        ``SamplingParams``): each token drawn from the next row through SPEC §12's pipeline in ``order``
        (``specsim.engine.sampling.processed_row``: penalties over the output so far, bans, bias, min_p,
        the grammar's mask after the output so far), temperature, top-k, top-p; enumerated exactly.
        Generation stops after ``max_tokens``, at EOS (unless ``ignore_eos``) or a stop token (kept), or
        at ``max_model_len``. Temperature 0: the single penalised greedy chain, with probability 1.

        >>> from specsim.engine.state import SamplingParams
        >>> lm = ToyLM.constant([0.5, 1.0])          # the prompt's 1 is penalised: 1/4 < 0.5, then 0 too
        >>> lm.sequence_law_given([1], SamplingParams(temperature=0, max_tokens=3, repetition_penalty=4.0))
        {(0, 1, 1): 1.0}
        """
        from specsim.engine.sampling import RequestSampler, processed_row
        sampler = RequestSampler.of(params, order=order, eos_id=self.eos_id)
        grammar, stops = sampler.grammar, set(params.stop_token_ids)
        if self.eos_id is not None and not params.ignore_eos:
            stops.add(self.eos_id)
        limit = params.max_tokens if max_model_len is None else min(params.max_tokens, max_model_len - len(prompt))
        law: dict[tuple[int, ...], float] = {}

        def walk(out: tuple[int, ...], prob: float) -> None:
            if len(out) >= limit or (out and out[-1] in stops):
                law[out] = law.get(out, 0.0) + prob
                return
            row = processed_row(sampler, self.next_logits(list(prompt) + list(out)), prompt=prompt, output=out,
                                mask=None if grammar is None else grammar.mask())
            for v in np.flatnonzero(row > 0):
                follows = grammar is not None and int(v) != grammar.eos_id and len(out) + 1 < limit
                if follows:
                    grammar.advance([int(v)])
                walk(out + (int(v),), prob * float(row[v]))
                if follows:
                    grammar.rollback(1)

        walk((), 1.0)
        return law
