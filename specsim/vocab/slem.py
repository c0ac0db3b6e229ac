"""String-Level Exact Match (SLEM; Timor et al., ICML 2025, Algorithm 2) for greedy decoding.

The drafter works in its own vocabulary on the **text**: its context is the
target's committed text re-tokenised by the draft tokenizer; its greedy
continuation is decoded to a string and re-tokenised by the **target**
tokenizer; those target ids are verified by exact match (SPEC §3 greedy).
The target only ever sees its own committed ids, so the output — ids and
string — is the target's non-speculative greedy output, whatever the drafter
does; re-tokenisation affects acceptance only.

Why re-tokenise the draft string alone: tokenisation is not injective across
boundaries (``encode(a) + encode(b) != encode(a + b)``), and the committed
target ids must not change; the proposal starts at the boundary.

>>> from specsim.engine.models import ToyLM
>>> from specsim.vocab.tokenizers import random_tokenizer
>>> t_tok, d_tok = random_tokenizer("ab c", 6, seed=1), random_tokenizer("ab c", 9, seed=2, marker="▁")
>>> target = ToyLM(t_tok.vocab_size, order=2, seed=3)
>>> out = slem_generate(target, t_tok, oracle_drafter(target, t_tok, d_tok), d_tok, [0, 1], max_tokens=12, k=3)
>>> out.token_ids == greedy_generate(target, [0, 1], 12)
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np

from reference.verify import verify
from specsim.vocab.tokenizers import ToyTokenizer



class NextTokenModel(Protocol):
    """Any model with a vocabulary size and next-token logits serves (the engine's ``ToyLM`` does); named by
    its duck type because the engine's proposers import this package, not the other way round."""

    vocab_size: int

    def next_logits(self, tokens: Sequence[int]) -> np.ndarray: ...

Drafter = Callable[[list, int], list]
"""``drafter(draft_context_ids, k) -> draft ids`` (at most k, greedy), in the draft vocabulary."""


@dataclass
class SlemResult:
    token_ids: list[int]                        # the generated target ids (prompt excluded)
    text: str                                   # their decoded string
    num_drafts: int = 0                         # target tokens proposed
    num_accepted: int = 0                       # of which accepted
    steps: int = 0
    accepted_per_step: list[int] = field(default_factory=list)


def greedy_generate(target: NextTokenModel, prompt_ids: Sequence[int], max_tokens: int) -> list[int]:
    """The target's plain greedy continuation (argmax, lowest id on ties), ``max_tokens`` ids."""
    tokens = list(prompt_ids)
    for _ in range(max_tokens):
        tokens.append(int(np.argmax(target.next_logits(tokens))))
    return tokens[len(prompt_ids):]


def lm_drafter(draft: NextTokenModel) -> Drafter:
    """A toy draft model over the draft vocabulary, drafting greedily."""
    def propose(context: list, k: int) -> list:
        tokens = list(context)
        for _ in range(k):
            tokens.append(int(np.argmax(draft.next_logits(tokens))))
        return tokens[len(context):]
    return propose


def oracle_drafter(target: NextTokenModel, target_tok: ToyTokenizer, draft_tok: ToyTokenizer, lookahead: int = 4) -> Drafter:
    """A drafter that knows the target but only through **text**: it re-tokenises
    its draft context into target ids, runs the target greedily, and spells the
    result in draft ids. Its proposals miss only where re-tokenisation changes
    the target's context (tokenisation is not injective) — SLEM's real cost."""
    def propose(context: list, k: int) -> list:
        target_context = target_tok.encode(draft_tok.decode(context))
        if not target_context:
            return []
        continuation = target_tok.decode(greedy_generate(target, target_context, lookahead))
        return draft_tok.encode(continuation)[:k]
    return propose


def slem_generate(target: NextTokenModel, target_tok: ToyTokenizer, drafter: Drafter, draft_tok: ToyTokenizer,
                  prompt_ids: Sequence[int], max_tokens: int, k: int) -> SlemResult:
    """Greedy speculative decoding across vocabularies; returns the target ids and the string.

    Each step: draft context = draft re-tokenisation of the committed text;
    draft ``k`` draft tokens; proposals = target re-tokenisation of their
    string, first ``k`` ids; verify them greedily against the target's rows
    (``reference.verify`` at temperature 0; greedy reads no noise, zeros are
    passed for form); commit the accepted ids plus the
    correction or bonus id; stop at ``max_tokens``.
    """
    if max_tokens < 0 or k < 0:
        raise ValueError(f"max_tokens, k: must be >= 0, got {max_tokens}, {k}")
    tokens = [int(t) for t in prompt_ids]
    out = SlemResult([], "")
    while len(out.token_ids) < max_tokens:
        context = tokens + out.token_ids
        draft_ids = drafter(draft_tok.encode(target_tok.decode(context)), k) if k else []
        proposals = target_tok.encode(draft_tok.decode(draft_ids))[:k] if draft_ids else []
        rows = [target.next_logits(context + proposals[:j]) for j in range(len(proposals) + 1)]
        step = verify(np.array([len(proposals)]), np.array(proposals, np.int64), None, np.array(rows),
                      np.zeros(1), np.zeros(1, np.int64), np.ones(1),
                      uniforms=np.zeros(len(proposals)), exponentials=np.ones((1, target.vocab_size)))
        n = int(step.num_accepted[0])
        emitted = [int(t) for t in step.output_token_ids[0, :n + 1]]
        out.token_ids.extend(emitted[:max_tokens - len(out.token_ids)])
        out.num_drafts += len(proposals)
        out.num_accepted += n
        out.steps += 1
        out.accepted_per_step.append(n)
    out.text = target_tok.decode(out.token_ids)
    return out


__all__ = ["slem_generate", "greedy_generate", "lm_drafter", "oracle_drafter", "SlemResult", "Drafter"]
