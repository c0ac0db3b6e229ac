"""Heterogeneous vocabularies (seed 001; Timor et al., ICML 2025, arXiv:2502.05202): toy tokenizers,
the TLI vocabulary mapping, and SLEM for greedy decoding. See docs/platforms.md."""

from specsim.vocab.mapping import VocabError, VocabMapping
from specsim.vocab.slem import SlemResult, greedy_generate, lm_drafter, oracle_drafter, slem_generate
from specsim.vocab.tokenizers import SPACE_MARKERS, ToyTokenizer, TokenizerError, normalise, random_tokenizer

__all__ = ["VocabMapping", "VocabError", "ToyTokenizer", "TokenizerError", "SPACE_MARKERS", "normalise",
           "random_tokenizer", "slem_generate", "greedy_generate", "lm_drafter", "oracle_drafter", "SlemResult"]
