"""specsim.testing.embed: a small step re-stated at a large vocabulary keeps its exact answer."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.judge.compare import reference_step
from specsim.testing.embed import embed_at, mapped, spread_ids, tail_ids
from specsim.testing.sampler_edges import SAMPLER_EDGES


def test_ids_are_increasing_and_reach_the_path_changes():
    for V in (5, 300, 65537, 151936):
        for v in (2, 4, 16):
            if v > V:
                with pytest.raises(ValueError, match="v:"):
                    spread_ids(V, v)
                continue
            for ids in (spread_ids(V, v), tail_ids(V, v)):
                assert len(ids) == v and (np.diff(ids) > 0).all() and 0 <= ids[0] and ids[-1] == V - 1
    assert {0, 2047, 32767, 65536} == set(spread_ids(65537, 4).tolist())
    nested = mapped(np.array([10, 20, 30]), [[2, -1], (0,)])
    assert nested == [[30, -1], (10,)]
    assert mapped(np.array([10, 20, 30]), 1) == 20


@pytest.mark.parametrize("where", ["spread", "tail"])
def test_every_sampler_edge_keeps_its_answer_at_a_large_vocabulary(where):
    V = 65537
    for edge in SAMPLER_EDGES:
        for order in edge.orders:
            batch, noise = edge.batch(order)
            ids = spread_ids(V, batch.vocab_size) if where == "spread" else tail_ids(V, batch.vocab_size)
            wide, wide_noise = embed_at(batch, noise, V, ids)
            assert wide.vocab_size == V and wide_noise.exponentials.shape == (batch.batch_size, V)
            step = reference_step(wide, wide_noise)
            got = [step.output_token_ids[i, : int(step.num_accepted[i]) + 1].tolist() for i in range(batch.batch_size)]
            want = [[int(t) for t in mapped(ids, list(tokens))] for tokens in edge.expected_in(order)]
            assert got == want, (edge.name, order, where)


def test_the_rest_of_the_vocabulary_is_out_of_play():
    edge = SAMPLER_EDGES[0]
    batch, noise = edge.batch(edge.orders[0])
    ids = spread_ids(4099, batch.vocab_size)
    wide, wide_noise = embed_at(batch, noise, 4099, ids)
    others = np.setdiff1d(np.arange(4099), ids)
    assert np.isneginf(wide.target_logits[:, others]).all()
    assert (wide_noise.exponentials[:, others] == 1.0).all()
    if wide.sampler.token_mask is not None:
        assert not wide.sampler.token_mask[:, others].any()
    with pytest.raises(ValueError, match="ids"):
        embed_at(batch, noise, 4099, ids[::-1])
