"""PTD input preparation: reference vs torch vs Triton (interpreter), the seed's three bugs, the proposer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devices.ptd import (FIELDS, allocate_buffers, buffer_rows, cpu_query_start_loc,
                         prepare_ptd_inputs_torch)
from property_tests import extras
from reference.ptd import PtdInputError, buffer_size, prepare_ptd_inputs, ptd_draft_rows
from specsim.testing.seeds import case_seed

try:
    from devices import triton_mode
    triton_mode.enter(True, "the PTD interpreter tests")   # skipped where this process runs compiled Triton
    prepare_ptd_inputs_triton = triton_mode.kernel_module("devices.ptd_triton", True).prepare_ptd_inputs_triton
    TRITON = None
except Exception as e:  # ImportError, or a triton without the interpreter
    TRITON = f"triton unavailable: {e!r}"

TRITON_MARKS = [pytest.mark.needs_extra("triton"),   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
                pytest.mark.skipif(TRITON is not None and extras.present("triton"), reason=str(TRITON))]

SENTINEL = -7


def random_case(rng, batch=None, draft_len=None, near_end=0.3):
    """A target step's flattened rows, with rejections, some requests near max_model_len."""
    batch = batch or int(rng.integers(1, 6))
    block_size = int(rng.integers(1, 9))
    max_model_len = int(rng.integers(8, 64))
    draft_len = int(rng.integers(0, 5)) if draft_len is None else draft_len
    query_len = rng.integers(1, 6, batch)
    num_rejected = np.array([int(rng.integers(0, q)) for q in query_len])
    first_pos = np.array([int(rng.integers(0, max_model_len - q + 1)) for q in query_len])
    end_heavy = rng.random(batch) < near_end
    first_pos = np.where(end_heavy, max_model_len - query_len, first_pos)
    blocks = -(-max_model_len // block_size)
    table = rng.permutation(batch * blocks).reshape(batch, blocks)
    qsl = np.concatenate([[0], np.cumsum(query_len)])
    positions = np.concatenate([np.arange(p, p + q) for p, q in zip(first_pos, query_len)])
    owner = np.repeat(np.arange(batch), query_len)
    slots = table[owner, positions // block_size] * block_size + positions % block_size
    tokens = rng.integers(0, 100, int(qsl[-1]))
    return dict(token_ids=tokens, positions=positions, slot_mapping=slots, query_start_loc=qsl,
                num_rejected=num_rejected, block_table=table), \
        dict(block_size=block_size, max_model_len=max_model_len, draft_len=draft_len, mask_token_id=999)


def run_all(arrays, kw, cap_drafts=True, spare=3):
    want = prepare_ptd_inputs(**arrays, **kw, cap_drafts=cap_drafts)
    kept_last = arrays["positions"][arrays["query_start_loc"][:-1] + np.diff(arrays["query_start_loc"])
                                    - arrays["num_rejected"] - 1]
    host_qsl = cpu_query_start_loc(arrays["query_start_loc"], arrays["num_rejected"], kept_last,
                                   draft_len=kw["draft_len"], max_model_len=kw["max_model_len"], cap_drafts=cap_drafts)
    total = int(host_qsl[-1])
    tensors = {k: torch.tensor(v, dtype=torch.int64) for k, v in arrays.items()}
    got = {"torch": prepare_ptd_inputs_torch(**tensors, **kw, cap_drafts=cap_drafts, total=total,
                                             out=allocate_buffers(total + spare, fill=SENTINEL))}
    if TRITON is None:
        got["triton"] = prepare_ptd_inputs_triton(**tensors, **kw, cap_drafts=cap_drafts, total=total, block=8,
                                                  out=allocate_buffers(total + spare, fill=SENTINEL))
    return want, host_qsl, got


@pytest.mark.parametrize("impl", ["torch", pytest.param("triton", marks=TRITON_MARKS)])
@pytest.mark.parametrize("cap_drafts", [True, False])
def test_torch_and_triton_match_reference(cap_drafts, impl):
    rng = np.random.default_rng(case_seed(0, f"ptd-agree-{cap_drafts}"))
    for _ in range(12):
        arrays, kw = random_case(rng)
        want, host_qsl, got = run_all(arrays, kw, cap_drafts)
        assert host_qsl.tolist() == want.query_start_loc.tolist()
        for name, out in [(impl, got[impl])]:
            assert out["query_start_loc"].tolist() == want.query_start_loc.tolist(), name
            for field in FIELDS:
                assert out[field][:want.total].tolist() == getattr(want, field).tolist(), (name, field)
                untouched = allocate_buffers(1, fill=SENTINEL)[field][0]
                assert (out[field][want.total:] == untouched).all(), (name, field, "written past total")


def test_no_position_wraps_to_zero_and_overflow_gets_padding_slot():
    arrays, kw = random_case(np.random.default_rng(1), batch=3, draft_len=4, near_end=1.0)
    capped = prepare_ptd_inputs(**arrays, **kw)
    assert (capped.positions < kw["max_model_len"]).all() and (capped.slot_mapping >= 0).all()
    assert capped.num_mask.tolist() == [0, 0, 0] or (capped.positions[capped.is_mask] > 0).all()
    static = prepare_ptd_inputs(**arrays, **kw, cap_drafts=False)
    request = np.searchsorted(static.query_start_loc[1:], np.arange(static.total), side="right")
    local = np.arange(static.total) - static.query_start_loc[request]
    true_pos = static.positions[static.last_kept_index[request]] + 1 + local - static.num_kept[request]
    beyond = static.is_mask & (true_pos >= kw["max_model_len"])
    assert beyond.any()
    assert (static.positions[beyond] == kw["max_model_len"] - 1).all()     # held at the end, never 0
    assert (static.slot_mapping[beyond] == -1).all()                        # nothing written
    assert (static.slot_mapping[~beyond] >= 0).all()


def test_buffer_sizing_reproduces_the_8213_crash():
    """8192 scheduled tokens, 7 requests, 3 masks each: 8213 rows, more than 8192 + 7."""
    qlen = np.full(7, 8192 // 7)
    qlen[0] += 8192 - qlen.sum()
    qsl = np.concatenate([[0], np.cumsum(qlen)])
    positions = np.concatenate([np.arange(q) for q in qlen])
    table = np.arange(7 * 128).reshape(7, 128)
    arrays = dict(token_ids=np.zeros(8192, np.int64), positions=positions, slot_mapping=positions,
                  query_start_loc=qsl, num_rejected=np.zeros(7, np.int64), block_table=table)
    kw = dict(block_size=16, max_model_len=2048, draft_len=3, mask_token_id=0)
    assert buffer_size(8192, 7, 3) == buffer_rows(8192, 7, 3) == 8213
    assert prepare_ptd_inputs(**arrays, **kw, buffer_rows=8213).total == 8213
    with pytest.raises(PtdInputError, match="needs 8213 rows but its buffers hold 8199"):
        prepare_ptd_inputs(**arrays, **kw, buffer_rows=8192 + 7)      # the pre-fix sizing
    tensors = {k: torch.tensor(v) for k, v in arrays.items()}
    with pytest.raises(ValueError, match="needs 8213 rows"):
        prepare_ptd_inputs_torch(**tensors, **kw, total=8213, out=allocate_buffers(8199))


def test_the_prs_total_overcounts_when_tokens_are_rejected():
    """PR #32628 launched num_actual_tokens + B·draft_len rows; the live rows end at the last qsl."""
    arrays, kw = random_case(np.random.default_rng(2), batch=4, draft_len=2, near_end=0.0)
    arrays["num_rejected"] = np.array([1, 0, 2, 0])
    arrays["query_start_loc"] = np.array([0, 3, 4, 7, 8])
    n = 8
    arrays = {**arrays, **{k: np.arange(n) + 1 for k in ("token_ids", "positions", "slot_mapping")}}
    kw["max_model_len"] = 64
    arrays["block_table"] = np.arange(4 * 64).reshape(4, 64)
    out = prepare_ptd_inputs(**arrays, **kw)
    pr_total = n + 4 * kw["draft_len"]
    assert out.total == int(out.query_start_loc[-1]) == pr_total - 3


def test_draft_rows_depend_on_context_and_mask_count_only():
    row_of = lambda ctx: np.eye(5)[hash(tuple(ctx)) % 5]  # noqa: E731
    rows = ptd_draft_rows(row_of, [1, 2], 3, mask_token_id=9)
    assert rows.shape == (3, 5)
    assert (rows[2] == row_of([1, 2, 9, 9])).all()


@TRITON_MARKS[0]
@TRITON_MARKS[1]
def test_triton_mask_rows_of_request_zero():
    """Mask rows of request 0 are where a 'previous row' load would read index -1 (bug #13's
    pattern); the kernel clamps addresses before loading, and the rows agree with the reference."""
    arrays, kw = random_case(np.random.default_rng(3), batch=1, draft_len=4, near_end=0.0)
    want, _, got = run_all(arrays, kw)
    assert got["triton"]["token_ids"][:want.total].tolist() == want.token_ids.tolist()
