"""The end-to-end check: an engine's speculative ``generate`` against the target's exact sequence law.

For ``new_tokens`` = n and vocabulary V, the law of the whole generated
sequence is ``P(y_1..y_n) = Π_t law(y_t | y_<t)``, the product of the target's
next-token laws (with the processors ``generate`` applies); ``sequence_law``
enumerates it over all V^n sequences (pruning zero branches), exactly in
float64. Lossless speculative generation draws from exactly this law, so:

* ``E2E/<engine>/sequence-law``: ``samples`` sequences, each from its own
  seed, tested against it (pooled Cressie-Read 2/3, ``specsim.judge.stats``) at
  the stated α, with the worst-case TV it detects with power 1-β at that n;
* ``E2E/<engine>/support``: no sampled sequence of target probability 0
  (exact, no α);
* ``E2E/<engine>/greedy``: greedy output with speculation equals the
  target's alone, token for token (exact).

>>> law = sequence_law(_Coin(), 2)            # two fair coin flips: four sequences of 1/4
>>> law.tolist()
[0.25, 0.25, 0.25, 0.25]
"""

from __future__ import annotations

import numpy as np

from specsim.judge import stats
from specsim.conformance.core.results import CheckResult
from specsim.field.engines.protocol import GenerateEngine


def sequence_index(tokens, vocab_size: int) -> int:
    """A sequence's cell: its tokens read as a base-V number, first token most significant.

    >>> sequence_index((1, 0, 2), 4)
    18
    """
    index = 0
    for t in tokens:
        index = index * vocab_size + int(t)
    return index


def sequence_law(engine: GenerateEngine, new_tokens: int) -> np.ndarray:
    """``[V ** new_tokens]`` float64: the exact law of the generated sequence (zero branches pruned)."""
    V = engine.vocab_size
    law = np.zeros(V ** new_tokens)

    def walk(prefix: tuple, p: float) -> None:
        if len(prefix) == new_tokens:
            law[sequence_index(prefix, V)] = p
            return
        step = np.asarray(engine.next_token_law(prefix), dtype=np.float64)
        for token in np.flatnonzero(step > 0):
            walk(prefix + (int(token),), p * float(step[token]))

    walk((), 1.0)
    return law


def sample_counts(engine: GenerateEngine, samples: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """``[V ** n]`` counts of ``samples`` sequences (seeds derived from ``seed``), and malformed outputs."""
    V, n = engine.vocab_size, engine.new_tokens
    counts = np.zeros(V ** n, dtype=np.int64)
    malformed = []
    for i in range(samples):
        tokens = tuple(engine.sample(stats.case_seed(seed, engine.name, "sample", i)))
        if len(tokens) != n or any(not 0 <= t < V for t in tokens):
            malformed.append(f"sample {i}: {tokens}")
            continue
        counts[sequence_index(tokens, V)] += 1
    return counts, malformed


def check_engine(engine: GenerateEngine, samples: int, *, alpha: float = 1e-3, seed: int = 0,
                 beta: float = stats.DEFAULT_BETA) -> list[CheckResult]:
    """The three checks of the module docstring for one engine configuration (α spent on one test)."""
    prefix = f"E2E/{engine.name}"
    budget = stats.Budget(alpha, 1)
    law = sequence_law(engine, engine.new_tokens)
    counts, malformed = sample_counts(engine, samples, seed)
    res = stats.gof_test(counts, law, budget.nominal, beta=beta, what=f"{prefix}/sequence-law", seed=seed)
    out = [CheckResult(f"{prefix}/sequence-law", "E2E", "pass" if res.passed else "fail", res.report(),
                       p_value=float(res.p_value), alpha=budget.nominal, n=int(res.n), statistic=float(res.statistic),
                       detectable_tv=float(res.detectable_tv), seed=seed,
                       extra={"alpha_family": alpha, "sequences": int(np.count_nonzero(law)),
                              "new_tokens": engine.new_tokens, "vocab_size": engine.vocab_size, **res.extra()})]
    sup = stats.support_check(counts, law, what=f"{prefix}/support", seed=seed)
    problems = ([sup.report()] if not sup.passed else []) + malformed[:3]
    out.append(CheckResult(f"{prefix}/support", "E2E", "fail" if problems else "pass",
                           "; ".join(problems) if problems else
                           f"{samples} sequences, none of target probability 0, all {engine.new_tokens} tokens in [0, V)",
                           n=samples, seed=seed))
    spec, target = engine.greedy()
    same = tuple(spec) == tuple(target)
    out.append(CheckResult(f"{prefix}/greedy", "E2E", "pass" if same else "fail",
                           f"speculative greedy = target greedy: {list(spec)}" if same else
                           f"speculative greedy {list(spec)} != target greedy {list(target)}"))
    return out


class _Coin:
    """A two-token engine of fair coin flips, for the docstring."""

    name, vocab_size, new_tokens = "coin", 2, 2

    def next_token_law(self, prefix):
        return np.array([0.5, 0.5])
