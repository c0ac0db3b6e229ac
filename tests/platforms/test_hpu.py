"""The ``hpu`` device: static shapes (compile, no recompiles), padding never leaks, bug #28, input layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devices.hpu_device import HpuDevice, pad_batch, prepare_decode_inputs, verify_static
from devices.protocol import Noise, VerifyBatch
from reference.hpu_layout import decode_layout
from specsim.testing.batches import BatchSpec, random_batch, random_noise
from specsim.judge.compare import compare, reference_step
from specsim.testing.seeds import case_seed


def _batches(seed: int, count: int, **spec):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        s = BatchSpec(**{"batch": int(rng.integers(1, 5)), "max_k": 4, "vocab_size": 16, **spec})
        batch = random_batch(rng, s)
        yield batch, random_noise(rng, batch)


def _compile_run(backend: str, draft_probs: bool, count: int):
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    device = HpuDevice(compile=True, backend=backend, batch_buckets=(4,), k_buckets=(4,))
    with torch._dynamo.config.patch(error_on_recompile=False):
        results = []
        for batch, noise in _batches(case_seed(0, f"hpu-compile-{draft_probs}"), count, draft_probs=draft_probs):
            results.append((batch, noise, device.verify(batch, noise), device.verify(batch, None)))
    return device, dict(counters["stats"]), results


def test_static_graph_compiles_once_per_bucket_and_never_recompiles():
    """fullgraph=True fails on any graph break (host sync, data-dependent shape);
    varying batch size (1..4 → bucket 4), K, modes and data must reuse the graph."""
    device, stats, results = _compile_run("aot_eager", draft_probs=True, count=5)
    # One graph per (noise kind: injected/keyed) × (host-known "any top-k/top-p"): at most 4, each compiled once.
    assert stats["unique_graphs"] == len(device.shapes_seen) <= 4, (stats, device.shapes_seen)
    for batch, noise, injected, keyed in results:       # and the compiled graphs are still right
        assert compare(batch, injected, reference_step(batch, noise)).ok
        assert compare(batch, keyed, reference_step(batch, None)).ok


def test_error_on_recompile_within_a_bucket():
    import torch._dynamo
    torch._dynamo.reset()
    device = HpuDevice(compile=True, backend="eager", batch_buckets=(4,), k_buckets=(4,))
    batches = list(_batches(case_seed(0, "hpu-recompile"), 4, draft_probs=False, top_k_fraction=0.0,
                            top_p_fraction=0.0))
    device.verify(*batches[0])                          # the one compile
    with torch._dynamo.config.patch(error_on_recompile=True):
        for batch, noise in batches[1:]:
            device.verify(batch, noise)                 # raises RecompileError on any guard failure


@pytest.mark.slow
def test_inductor_codegen_compiles_both_schemes():
    """Inductor generates code for the graphs (≈ 150 s on a busy 2-core CPU: opt-in)."""
    for draft_probs in (True, False):
        device, stats, results = _compile_run("inductor", draft_probs=draft_probs, count=3)
        assert stats["unique_graphs"] == len(device.shapes_seen)
        for batch, noise, injected, _ in results:
            assert compare(batch, injected, reference_step(batch, noise)).ok


@pytest.mark.parametrize("draft_probs", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_agrees_with_reference(draft_probs, dtype):
    device = HpuDevice()
    for batch, noise in _batches(case_seed(0, f"hpu-ref-{draft_probs}-{dtype}"), 6, draft_probs=draft_probs,
                                 dtype=dtype):
        for n in (noise, None):
            assert compare(batch, device.verify(batch, n), reference_step(batch, n)).ok


def test_padding_content_never_reaches_outputs():
    """Fill every padded slot and row with garbage: outputs of the real rows are unchanged."""
    rng = np.random.default_rng(case_seed(0, "hpu-garbage"))
    for batch, noise in _batches(case_seed(0, "hpu-garbage-batches"), 6):
        host = pad_batch(batch, 8, 8)
        k = np.zeros(8, np.int64)
        k[:batch.batch_size] = batch.num_draft_tokens
        uniforms = np.zeros((8, 8))
        uniforms[:batch.batch_size][np.arange(8)[None, :] < batch.num_draft_tokens[:, None]] = noise.uniforms
        exps = np.ones((8, batch.vocab_size))
        exps[:batch.batch_size] = noise.exponentials
        args = [host[n] for n in ("draft_ids", "draft_probs", "target_logits", "num_draft_tokens", "temperature",
                                  "top_k", "top_p")] + [uniforms, exps]
        clean = verify_static(*[torch.tensor(a) for a in args])
        dirty = [a.copy() for a in args]
        j = np.arange(9)[None, :]
        pad_target = (j > k[:, None])                                   # slots past the bonus row
        dirty[2][pad_target] = rng.normal(size=(int(pad_target.sum()), batch.vocab_size)) * 5
        pad_draft = j[:, :8] >= k[:, None]
        dirty[0][pad_draft] = rng.integers(0, batch.vocab_size, int(pad_draft.sum()))
        dirty[1][pad_draft] = rng.dirichlet(np.ones(batch.vocab_size), int(pad_draft.sum()))
        dirty[7][pad_draft] = rng.random(int(pad_draft.sum()))
        got = verify_static(*[torch.tensor(a) for a in dirty])
        b = batch.batch_size
        assert torch.equal(clean[1][:b], got[1][:b])
        assert torch.equal(clean[0][:b], got[0][:b])


def _gaudi_greedy(draft_ids, target_ids, bonus, num_draft):
    """vllm-gaudi's rejection_sample_pytorch (https://github.com/vllm-project/vllm-gaudi, docs/bugs.md #27, #28) on the padded layout, numpy."""
    matches = draft_ids == target_ids
    any_mismatch = (~matches).any(1)
    any_mismatch[num_draft == 0] = False                         # PR #593's fix; slots past n still compared
    first = np.argmax(~matches, axis=1)
    n_acc = np.where(any_mismatch, first, num_draft)
    bonus_kept = ~any_mismatch
    return n_acc, bonus_kept


def test_short_request_keeps_bonus_and_exact_count_bug28():
    """Request 1 has 1 draft in a batch whose max is 3; its draft is accepted.
    The static device emits its bonus; vllm-gaudi's padded comparison drops it."""
    V, NEG = 4, -np.inf
    greedy_row = lambda t: [5.0 if v == t else 0.0 for v in range(V)]  # noqa: E731
    batch = VerifyBatch(num_draft_tokens=np.array([3, 1]), draft_token_ids=np.array([1, 2, 3, 2]),
                        draft_probs=None,
                        target_logits=np.array([greedy_row(1), greedy_row(2), greedy_row(3), greedy_row(0),
                                                greedy_row(2), greedy_row(1)]),
                        temperature=np.zeros(2), top_k=np.zeros(2, np.int64), top_p=np.ones(2))
    out = HpuDevice().verify(batch, Noise(np.zeros(4), np.ones((2, V))))
    assert out.num_accepted.tolist() == [3, 1]
    assert out.emitted(1) == [2, 1]                              # the draft, then the bonus
    # The seed's sampler on the same padded layout: slot 1..2 of request 1 compare padding.
    draft = np.array([[1, 2, 3], [2, 0, 0]])                      # padded drafts: token_ids[0] = 0 (stand-in)
    target = np.array([[1, 2, 3], [2, 3, 3]])                     # padded target rows: logits[-1]'s argmax
    n_acc, bonus_kept = _gaudi_greedy(draft, target, None, np.array([3, 1]))
    assert n_acc.tolist() == [3, 1] and bonus_kept.tolist() == [True, False]   # the bug: bonus dropped


def test_decode_input_layout_matches_reference():
    rng = np.random.default_rng(case_seed(0, "hpu-layout"))
    for _ in range(25):
        batch = int(rng.integers(1, 6))
        padded, k_pad, block_size = 8, 4, int(rng.integers(1, 5))
        k = rng.integers(0, k_pad + 1, batch)
        max_model_len = int(rng.integers(8, 40))
        seq_lens = rng.integers(1, max_model_len + 1, batch)
        blocks = -(-(max_model_len + k_pad) // block_size)
        table = rng.permutation(batch * blocks).reshape(batch, blocks)
        last = rng.integers(0, 50, batch)
        drafts = rng.integers(0, 50, int(k.sum()))
        want = decode_layout(last, drafts, k, seq_lens, table, block_size=block_size, max_model_len=max_model_len,
                             padded_batch=padded, k_pad=k_pad)
        got = prepare_decode_inputs(*(torch.tensor(a) for a in (last, drafts, k, seq_lens, table)),
                                    block_size=block_size, max_model_len=max_model_len, padded_batch=padded,
                                    k_pad=k_pad)
        for name, value in zip(("input_ids", "positions", "slot_mapping", "logits_indices"), got):
            assert value.tolist() == want[name].tolist(), name
