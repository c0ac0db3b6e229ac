"""L0 with SPEC §12 rows: the step's exact law, by enumeration over the drafts.

Rows depend on the drafts before them (``reference.sampler.prefix_rows``), so the law is
enumerated prefix by prefix (``reference.laws`` with callable rows). Two statements:

- lossless, exactly: with each row's float64 ``target_probs`` taken as a ``Fraction`` law,
  the token emitted at every position, given the prefix reached, follows the row (error 0);
- the rows are the non-speculative sampler's: at every prefix the emitted law equals the row a
  sampler without speculation computes after emitting that prefix (one row, no drafts, the
  prefix appended to the output so far) — to float64 rounding.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from reference import laws
from reference.sampler import prefix_rows, sampler_rows


def _params(rng: np.random.Generator, K: int, V: int, order: str) -> dict:
    """Every §12 parameter, random, with token 0 allowed at every row (no row is emptied)."""
    words = [rng.integers(0, V, n) for n in rng.integers(1, 4, 3)]
    mask = rng.random((K + 1, V)) < 0.7
    mask[:, 0] = True
    return {"order": order, "output_token_ids": [rng.integers(0, V, 2)], "prompt_token_ids": [rng.integers(0, V, 2)],
            "token_mask": mask, "allowed_token_ids": [np.union1d([0], rng.integers(0, V, V - 1))],
            "bad_words": [[w for w in words if w[-1] != 0]], "min_tokens": np.array([rng.integers(2, K + 4)]),
            "stop_token_ids": [np.array([V - 1])], "logit_bias": rng.normal(0, 1, (1, V)),
            "repetition_penalty": np.array([rng.uniform(1.1, 1.3)]), "frequency_penalty": np.array([rng.uniform(0, .5)]),
            "presence_penalty": np.array([rng.uniform(0, .5)]), "min_p": np.array([rng.uniform(0.05, 0.1)])}


def _exact(row) -> list:
    """A float64 row as a Fraction law (normalised exactly)."""
    fractions = [Fraction(float(x)) for x in row]
    return [x / sum(fractions) for x in fractions]


def _nonspeculative(logits, params: dict, j: int, T: float, top_k: int, top_p: float):
    """Row ``j`` as a sampler without speculation computes it after emitting ``prefix``."""
    def row(prefix):
        history = dict(params, output_token_ids=[list(params["output_token_ids"][0]) + list(prefix)],
                       token_mask=params["token_mask"][j: j + 1])
        return sampler_rows(logits[j: j + 1], [0], np.zeros(0, np.int64), [T], [top_k], [top_p], **history)[0]
    return row


steps = st.tuples(st.integers(2, 5), st.integers(0, 3), st.integers(0, 2**32 - 1), st.sampled_from(["canonical", "vllm"]),
                  st.sampled_from([0.7, 1.0, 1.5]), st.sampled_from([0, 2]), st.sampled_from([1.0, 0.9]))


@given(steps)
def test_section_12_rows_are_lossless_exactly(step):
    V, K, seed, order, T, top_k, top_p = step
    rng = np.random.default_rng(seed)
    logits, drafts = rng.normal(0, 2, (K + 1, V)), rng.dirichlet(np.ones(V), K)
    rows = [lambda prefix, f=f: _exact(f(prefix)) for f in prefix_rows(logits, T, top_k, top_p,
                                                                      **_params(rng, K, V, order))]
    law = laws.emitted_law(rows, [_exact(d) for d in drafts], "full", exact=True)
    assert sum(law.values()) == 1
    assert laws.lossless_error(law, rows) == 0


@given(steps)
def test_each_position_follows_the_nonspeculative_sampler(step):
    V, K, seed, order, T, top_k, top_p = step
    rng = np.random.default_rng(seed)
    logits, drafts = rng.normal(0, 2, (K + 1, V)), rng.dirichlet(np.ones(V), K)
    params = _params(rng, K, V, order)
    law = laws.emitted_law(prefix_rows(logits, T, top_k, top_p, **params), drafts.tolist(), "full")
    nonspeculative = [_nonspeculative(logits, params, j, T, top_k, top_p) for j in range(K + 1)]
    assert laws.lossless_error(law, nonspeculative) < 1e-12
