"""Properties of the seeds' platforms (hypothesis-drawn; exact laws, no statistics).

* TLI (seed 001): for any pair of vocabularies with a non-empty intersection,
  verification with the constrained, renormalised, mapped draft law is
  lossless (``reference.laws.emitted_law``, exact enumeration), and the
  acceptance probability is exactly ``Σ min(target, constrained draft)``;
  an empty intersection or an out-of-range id is refused by name.
* SLEM: greedy output — ids and string — equals the target's plain greedy
  output for any tokenizer pair, drafter and K.
* PTD (seed 002): query start locations identical in reference, torch and
  Triton; the total is the last query start location when tokens were
  rejected; buffers of ``max_num_batched_tokens + max_num_seqs × draft_len``
  hold exactly at the boundary; nothing is written past the live rows, and
  every position at or past ``max_model_len`` has ``PADDING_SLOT_ID``.
* HPU (seed 000): a request with fewer drafts than the batch maximum keeps
  its bonus token and its exact ``num_accepted`` (docs/bugs.md #28).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from devices.hpu_device import HpuDevice
from devices.protocol import Noise, VerifyBatch
from devices.ptd import allocate_buffers, prepare_ptd_inputs_torch
from property_tests import extras
from reference.laws import emitted_law, lossless_error
from reference.ptd import PADDING_SLOT_ID, PtdInputError, buffer_size, prepare_ptd_inputs
from specsim.engine.models import ToyLM
from specsim.vocab import (VocabError, VocabMapping, greedy_generate, lm_drafter, oracle_drafter,
                           random_tokenizer, slem_generate)

try:  # PTD's Triton kernel compiled on a GPU, in the interpreter on a machine without one
    from devices import triton_mode
    PTD_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
    triton_mode.enter(PTD_DEVICE == "cpu", "the PTD property test")
    prepare_ptd_inputs_triton = triton_mode.kernel_module("devices.ptd_triton",
                                                          PTD_DEVICE == "cpu").prepare_ptd_inputs_triton
    TRITON_SKIP = None
except Exception as e:
    TRITON_SKIP = f"triton unavailable: {e!r}"

torch.set_num_threads(1)
SENTINEL = -7

# --------------------------------------------------------------------------- TLI

alphabets = st.sampled_from(["ab ", "abc", "ab c", "xyz ", "axy"])


@st.composite
def vocab_pairs(draw):
    """Two random vocabularies over overlapping alphabets; the intersection may be empty."""
    t_tok = random_tokenizer(draw(alphabets), draw(st.integers(0, 6)), seed=draw(st.integers(0, 99)),
                             marker=draw(st.sampled_from("Ġ▁")), specials=())
    d_tok = random_tokenizer(draw(alphabets), draw(st.integers(0, 6)), seed=draw(st.integers(100, 199)),
                             marker=draw(st.sampled_from("Ġ▁")), specials=())
    return t_tok, d_tok


def _rows(seed: int, count: int, size: int, sparse: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = rng.dirichlet(np.ones(size) * 0.7, count)
    if sparse:
        rows = np.where(rng.random(rows.shape) < 0.3, 0.0, rows)
        rows[:, 0] += 1e-3   # keep mass
        rows /= rows.sum(axis=1, keepdims=True)
    return rows


@given(vocab_pairs(), st.integers(1, 2), st.integers(0, 2**31), st.booleans())
def test_tli_is_lossless_for_any_pair_with_an_intersection(pair, k, seed, sparse):
    t_tok, d_tok = pair
    try:
        mapping = VocabMapping(t_tok, d_tok)
    except VocabError as e:
        assert "share no token" in str(e)
        return
    target_rows = _rows(seed, k + 1, t_tok.vocab_size, sparse)
    draft_rows = _rows(seed + 1, k, d_tok.vocab_size, False)
    mapped = mapping.to_target(draft_rows)
    assert np.allclose(mapped.sum(axis=1), 1) and (mapped[:, ~np.isin(np.arange(t_tok.vocab_size),
                                                                      mapping.draft_to_target)] == 0).all()
    law = emitted_law(list(target_rows), list(mapped), "full")
    assert lossless_error(law, list(target_rows)) < 1e-12


@given(vocab_pairs(), st.integers(0, 2**31))
def test_tli_acceptance_is_sum_of_min_exactly(pair, seed):
    t_tok, d_tok = pair
    try:
        mapping = VocabMapping(t_tok, d_tok)
    except VocabError:
        reject()  # no shared token: no mapping to check (the lossless test above checks the refusal)
    target = [Fraction(x) for x in _rows(seed, 2, t_tok.vocab_size, False).reshape(-1)]
    target_rows = [target[:t_tok.vocab_size], target[t_tok.vocab_size:]]
    target_rows = [[x / sum(row) for x in row] for row in target_rows]      # exact laws: sum to 1 exactly
    mapped = [Fraction(x) for x in mapping.to_target(_rows(seed + 1, 1, d_tok.vocab_size, False))[0]]
    mapped = [x / sum(mapped) for x in mapped]
    law = emitted_law(target_rows, [mapped], "full", exact=True)
    accepted = sum(p for tokens, p in law.items() if len(tokens) == 2)
    assert accepted == sum(min(a, b) for a, b in zip(target_rows[0], mapped))


@given(st.integers(0, 99), st.integers(0, 99))
def test_tli_refuses_empty_intersections_and_bad_ids(seed_a, seed_b):
    t_tok = random_tokenizer("ab", 3, seed=seed_a, specials=())
    d_tok = random_tokenizer("xy", 3, seed=seed_b, marker="▁", specials=())
    with pytest.raises(VocabError, match="share no token"):
        VocabMapping(t_tok, d_tok)
    mapping = VocabMapping(t_tok, random_tokenizer("ay", 3, seed=seed_b, specials=()))
    with pytest.raises(VocabError, match="outside the draft vocabulary"):
        mapping.map_draft_to_target([mapping.draft_vocab_size])
    with pytest.raises(VocabError, match="outside the target vocabulary"):
        mapping.map_target_to_draft([-1], fallback=0)


# --------------------------------------------------------------------------- SLEM

@settings(max_examples=20)
@given(vocab_pairs(), st.integers(0, 4), st.integers(0, 50), st.booleans(), st.integers(1, 3))
def test_slem_greedy_equals_target_greedy(pair, k, seed, oracle, order):
    t_tok, d_tok = pair
    chars = set("".join(t_tok.texts)) & set("".join(d_tok.texts))
    if not chars:
        reject()  # no shared character: no prompt both tokenizers can spell
    target = ToyLM(t_tok.vocab_size, order=order, seed=seed)
    prompt = t_tok.encode(sorted(chars)[0])
    drafter = oracle_drafter(target, t_tok, d_tok) if oracle else lm_drafter(ToyLM(d_tok.vocab_size, seed=seed + 1))
    try:
        out = slem_generate(target, t_tok, drafter, d_tok, prompt, max_tokens=10, k=k)
    except Exception as e:                         # the draft tokenizer cannot spell the target's text
        assert "has no piece" in str(e)
        return
    want = greedy_generate(target, prompt, 10)
    assert out.token_ids == want and out.text == t_tok.decode(want)


# --------------------------------------------------------------------------- PTD

@st.composite
def ptd_cases(draw):
    batch = draw(st.integers(1, 5))
    block_size = draw(st.integers(1, 8))
    max_model_len = draw(st.integers(6, 40))
    query_len = [draw(st.integers(1, min(5, max_model_len))) for _ in range(batch)]
    num_rejected = [draw(st.integers(0, q - 1)) for q in query_len]
    first = [draw(st.integers(0, max_model_len - q)) for q in query_len]
    blocks = -(-max_model_len // block_size)
    table = np.array(draw(st.permutations(range(batch * blocks)))).reshape(batch, blocks)
    qsl = np.concatenate([[0], np.cumsum(query_len)])
    positions = np.concatenate([np.arange(f, f + q) for f, q in zip(first, query_len)])
    owner = np.repeat(np.arange(batch), query_len)
    arrays = dict(token_ids=np.arange(len(positions)) + 100, positions=positions,
                  slot_mapping=table[owner, positions // block_size] * block_size + positions % block_size,
                  query_start_loc=qsl, num_rejected=np.array(num_rejected), block_table=table)
    kw = dict(block_size=block_size, max_model_len=max_model_len, draft_len=draw(st.integers(0, 4)),
              mask_token_id=7, cap_drafts=draw(st.booleans()))
    return arrays, kw


IMPLS = ["torch", pytest.param("triton", marks=[
    pytest.mark.needs_extra("triton"),   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
    pytest.mark.skipif(TRITON_SKIP is not None and extras.present("triton"), reason=str(TRITON_SKIP))])]
"""PTD's implementations compared with the reference; one the checkout cannot load is a visible skip."""


@pytest.mark.parametrize("impl", IMPLS)
@given(case=ptd_cases())
def test_ptd_query_start_locations_and_rows_agree_everywhere(impl, case):
    arrays, kw = case
    want = prepare_ptd_inputs(**arrays, **kw)
    assert want.total == int(want.query_start_loc[-1])
    n_in = int(arrays["query_start_loc"][-1])
    rejected = int(arrays["num_rejected"].sum())
    assert want.total == n_in - rejected + int(want.num_mask.sum())
    if rejected:   # vLLM PR #32628's launch size overcounts exactly when tokens were rejected
        assert want.total < n_in + len(arrays["num_rejected"]) * kw["draft_len"]
    assert (want.slot_mapping[want.positions >= kw["max_model_len"]] == PADDING_SLOT_ID).all()
    assert (want.positions < kw["max_model_len"]).all()             # never past the end, never wrapped
    assert (want.positions[want.is_mask] > 0).all()
    tensors = {k: torch.tensor(v, dtype=torch.int64) for k, v in arrays.items()}
    impls = {"torch": ("cpu", prepare_ptd_inputs_torch),
             "triton": (PTD_DEVICE, lambda **a: prepare_ptd_inputs_triton(**a, block=8))}
    for name, (device, fn) in [(impl, impls[impl])]:
        out = fn(**{k: v.to(device) for k, v in tensors.items()}, **kw, total=want.total,
                 out=allocate_buffers(want.total + 4, device, fill=SENTINEL))
        assert out["query_start_loc"].tolist() == want.query_start_loc.tolist(), name
        for field in ("token_ids", "positions", "slot_mapping", "is_mask", "source_index"):
            assert out[field][:want.total].tolist() == getattr(want, field).tolist(), (name, field)
            untouched = allocate_buffers(1, fill=SENTINEL)[field][0]
            assert (out[field][want.total:] == untouched).all(), (name, field)


@given(st.integers(1, 16), st.integers(1, 6), st.integers(0, 4))
def test_ptd_buffers_hold_exactly_at_the_boundary(max_num_seqs, per_seq, draft_len):
    """A full step — max_num_seqs requests, every scheduled token kept — needs exactly the bound."""
    max_num_batched_tokens = max_num_seqs * per_seq
    qlen = np.full(max_num_seqs, per_seq)
    qsl = np.concatenate([[0], np.cumsum(qlen)])
    positions = np.concatenate([np.arange(q) for q in qlen])
    max_model_len = per_seq + draft_len + 1
    arrays = dict(token_ids=positions, positions=positions, slot_mapping=positions, query_start_loc=qsl,
                  num_rejected=np.zeros(max_num_seqs, np.int64),
                  block_table=np.zeros((max_num_seqs, max_model_len), np.int64))
    kw = dict(block_size=1, max_model_len=max_model_len, draft_len=draft_len, mask_token_id=0)
    bound = buffer_size(max_num_batched_tokens, max_num_seqs, draft_len)
    assert prepare_ptd_inputs(**arrays, **kw, buffer_rows=bound).total == bound
    if draft_len > 1:
        with pytest.raises(PtdInputError, match="buffers hold"):
            prepare_ptd_inputs(**arrays, **kw, buffer_rows=max_num_batched_tokens + max_num_seqs)


# --------------------------------------------------------------------------- HPU bug #28

@given(st.lists(st.integers(0, 4), min_size=1, max_size=6), st.integers(0, 2**31), st.booleans())
def test_hpu_short_requests_keep_bonus_and_exact_counts(ks, seed, greedy):
    """Every real draft is accepted (greedy: drafts are the argmax; random: coins 0 and
    draft_probs == target rows); each request must emit K_i drafts + its bonus token."""
    rng = np.random.default_rng(seed)
    V = 6
    ks = np.array(ks)
    rows = []
    drafts = []
    for k in ks:
        logits = rng.normal(size=(k + 1, V)) * 3
        rows.append(logits)
        drafts.extend(np.argmax(logits[:k], axis=1))
    logits = np.concatenate(rows)
    cu = np.concatenate([[0], np.cumsum(ks)])
    draft_rows = np.concatenate([logits[cu[i] + i: cu[i] + i + k] for i, k in enumerate(ks)]) if ks.sum() else \
        np.zeros((0, V))
    probs = np.exp(draft_rows - draft_rows.max(axis=1, keepdims=True)) if len(draft_rows) else draft_rows
    probs = probs / probs.sum(axis=1, keepdims=True) if len(probs) else probs
    batch = VerifyBatch(num_draft_tokens=ks, draft_token_ids=np.array(drafts, np.int64).reshape(-1),
                        draft_probs=None if greedy else probs, target_logits=logits,
                        temperature=np.zeros(len(ks)) if greedy else np.ones(len(ks)),
                        top_k=np.zeros(len(ks), np.int64), top_p=np.ones(len(ks)))
    out = HpuDevice().verify(batch, Noise(np.zeros(int(ks.sum())), rng.exponential(size=(len(ks), V)) + 1e-9))
    assert out.num_accepted.tolist() == ks.tolist()
    for i, k in enumerate(ks):
        emitted = out.emitted(i)
        assert len(emitted) == k + 1 and emitted[-1] >= 0
        if greedy:
            assert emitted[-1] == int(np.argmax(logits[cu[i] + i + k]))
