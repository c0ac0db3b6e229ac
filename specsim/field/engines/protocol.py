"""What an engine with a Python ``generate``-like call supplies to the end-to-end check.

A minimal engine::

    class MyEngine:
        name = "my-engine 1.2"
        vocab_size = 8
        new_tokens = 3                         # tokens each sequence adds after the prompt

        def sample(self, seed: int) -> tuple[int, ...]:
            ...  # one speculative generation with sampling, its randomness from `seed` only

        def next_token_law(self, prefix: tuple[int, ...]) -> np.ndarray:
            ...  # [vocab_size] float64: the TARGET's next-token law after prompt + prefix,
                 # with the same processors (temperature, top-k, top-p) generate applies

        def greedy(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
            ...  # (speculative greedy output, target-only greedy output), new tokens only

Lossless speculative generation means: the law of ``sample`` over seeds is
the product of ``next_token_law`` along the sequence, and greedy output is
the target's, token for token.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class GenerateEngine(Protocol):
    name: str
    vocab_size: int
    new_tokens: int

    def sample(self, seed: int) -> tuple[int, ...]: ...

    def next_token_law(self, prefix: tuple[int, ...]) -> np.ndarray: ...

    def greedy(self) -> tuple[tuple[int, ...], tuple[int, ...]]: ...
