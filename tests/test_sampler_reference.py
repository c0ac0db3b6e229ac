"""The reference step with SPEC §12 rows: ``reference.verify`` reads each row's
processed logits along the drafts before it, and its law is ``reference.laws``' with those rows."""

from collections import Counter

import numpy as np
import pytest

from devices.validate import validate
from devices.protocol import InvalidInput as DeviceInvalidInput, SamplerParams, VerifyBatch
from reference.laws import emitted_law, lossless_error
from reference.sampler import prefix_rows, process_logits
from reference.validate import InvalidInput
from reference.verify import verify

V, K = 5, 2
PARAMS = {"output_token_ids": [[1]], "prompt_token_ids": [[0]], "bad_words": [[[1, 3]]],
          "min_tokens": np.array([2]), "stop_token_ids": [[4]], "logit_bias": np.array([[0.0, 0.3, 0.0, -0.2, 0.1]]),
          "repetition_penalty": np.array([1.3]), "frequency_penalty": np.array([0.2]),
          "presence_penalty": np.array([0.1])}


def _many(params: dict, B: int) -> dict:
    """``params`` of one request repeated for ``B`` requests."""
    return {name: np.repeat(v, B, axis=0) if isinstance(v, np.ndarray) else list(v) * B for name, v in params.items()}


def test_without_filters_the_step_is_section_2_on_the_processed_logits():
    rng = np.random.default_rng(1812)
    B = 64
    k = rng.integers(0, K + 1, B)
    ids = rng.integers(0, V, k.sum())
    logits, draft = rng.normal(size=(k.sum() + B, V)), rng.dirichlet(np.ones(V), k.sum())
    args = (np.ones(B) * 0.9, np.zeros(B, int), np.ones(B))
    noise = {"uniforms": rng.random(k.sum()), "exponentials": rng.exponential(size=(B, V))}
    params = _many(PARAMS, B)
    got = verify(k, ids, draft, logits, *args, sampler=params, **noise)
    want = verify(k, ids, draft, process_logits(logits, k, ids, **params), *args, **noise)
    assert (got.output_token_ids == want.output_token_ids).all()


@pytest.mark.parametrize("order", ["canonical", "vllm"])
def test_the_steps_law_is_the_exact_law_with_section_12_rows(order):
    """B = 6000 steps of one request against the exact law (Fractions of the float64 rows): the TV
    between counts and law is below the largest of 399 multinomial draws of the law (α = 1/400;
    the TV this detects is about 0.04 for these ~50 outcomes)."""
    rng = np.random.default_rng(18 + len(order))
    params = dict(PARAMS, min_p=np.array([0.1]), order=order)
    logits, draft_rows = rng.normal(size=(K + 1, V)), rng.dirichlet(np.ones(V), K)
    rows = prefix_rows(logits, 1.0, 0, 0.95, **params)
    law = emitted_law(rows, draft_rows.tolist(), "full", exact=True)
    assert lossless_error(law, rows) < 1e-15   # float64 rows sum to 1 within rounding
    B = 6000
    ids = np.stack([rng.choice(V, B, p=draft_rows[j]) for j in range(K)], axis=1).ravel()
    step = verify(np.full(B, K), ids, np.tile(draft_rows, (B, 1)), np.tile(logits, (B, 1)), np.ones(B),
                  np.zeros(B, int), np.full(B, 0.95), sampler=_many(params, B) | {"order": order},
                  uniforms=rng.random(B * K), exponentials=rng.exponential(size=(B, V)))
    seen = Counter(tuple(t for t in row if t >= 0) for row in step.output_token_ids.tolist())
    tv = sum(abs(seen.get(s, 0) / B - float(law.get(s, 0))) for s in set(seen) | set(law)) / 2
    p = np.array([float(law[s]) for s in law])
    null = max(np.abs(rng.multinomial(B, p / p.sum()) / B - p).sum() / 2 for _ in range(399))
    assert tv < null, f"TV {tv:.4f} (null max {null:.4f}) between the step and its exact law (order {order}, seed {18 + len(order)})"


def test_a_banned_draft_is_rejected_even_at_u_0():
    # the bad word [1, 3] is completed by draft 3 after output [1]: rejected at u = 0, never recovered
    step = verify([1], [3], None, np.zeros((2, V)), [1.0], [0], [1.0], sampler={"output_token_ids": [[1]],
                  "bad_words": [[[1, 3]]]}, uniforms=np.zeros(1), exponentials=np.ones((1, V)))
    assert step.num_accepted.tolist() == [0] and step.output_token_ids[0, 0] != 3


def test_a_row_every_ban_empties_is_an_input_error():
    with pytest.raises(InvalidInput, match="token_mask: row 1"):
        verify([1], [2], None, np.zeros((2, 3)), [1.0], [0], [1.0], seeds=[0], positions=[0],
               sampler={"allowed_token_ids": [[2]], "bad_words": [[[2, 2]]]})


def test_devices_catch_a_row_the_draft_independent_bans_empty():
    sampler = SamplerParams(allowed_token_ids=(np.array([1, 2]),), bad_words=((np.array([2]),),),
                            token_mask=np.array([[True, True, False], [True, False, True]]))
    batch = VerifyBatch(np.array([1]), np.array([0]), None, np.zeros((2, 3)), np.ones(1), np.zeros(1, np.int64),
                        np.ones(1), sampler=sampler, seeds=np.zeros(1, np.uint64), positions=np.zeros(1, np.int64))
    with pytest.raises(DeviceInvalidInput, match=r"token_mask: row 1 \(request 0, bonus row\) allows no token"):
        validate(batch)
