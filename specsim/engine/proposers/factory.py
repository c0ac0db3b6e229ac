"""Build the platforms' proposers and devices for a synthetic workload (``specsim simulate``).

>>> from specsim.engine.models import ToyLM
>>> make_platform_proposer("universal", ToyLM(64, seed=0), seed=0).vocab_size
64
"""

from __future__ import annotations

from specsim.engine.models import ToyLM
from specsim.engine.proposers.ptd import PtdProposer
from specsim.engine.proposers.universal import UniversalDraftProposer
from specsim.vocab.mapping import VocabMapping
from specsim.vocab.tokenizers import random_tokenizer

ALPHABET = "abcde "


def tokenizer_pair(vocab_size: int, seed: int):
    """A target tokenizer of exactly ``vocab_size`` pieces (``Ġ``) and a larger draft one (``▁``), same alphabet."""
    merges = vocab_size - len(ALPHABET)
    if merges < 0:
        raise ValueError(f"vocab_size: the universal drafter needs >= {len(ALPHABET)} tokens, got {vocab_size}")
    target = random_tokenizer(ALPHABET, merges, seed=seed, max_len=4, specials=())
    draft = random_tokenizer(ALPHABET, merges + vocab_size // 4, seed=seed + 1, marker="▁", max_len=4, specials=())
    if target.vocab_size != vocab_size:
        raise ValueError(f"vocab_size: could not draw {vocab_size} distinct pieces over {ALPHABET!r}")
    return target, draft


def make_platform_proposer(kind: str, target: ToyLM, *, seed: int, closeness: float = 0.7, draft_probs: bool = True):
    """``"ptd"``: one-pass mask drafting from ``target.mixed(closeness)``; ``"universal"``: TLI from an
    independent draft model over a different tokenizer of the same alphabet."""
    if kind == "ptd":
        return PtdProposer(target.mixed(closeness, seed=seed + 3), use_probs=draft_probs)
    if kind == "universal":
        t_tok, d_tok = tokenizer_pair(target.vocab_size, seed)
        draft = ToyLM(d_tok.vocab_size, order=target.order, seed=seed + 4, max_position=target.max_position)
        return UniversalDraftProposer(draft, VocabMapping(t_tok, d_tok), use_probs=draft_probs)
    raise ValueError(f"kind: must be 'ptd' or 'universal', got {kind!r}")


__all__ = ["make_platform_proposer", "tokenizer_pair"]
