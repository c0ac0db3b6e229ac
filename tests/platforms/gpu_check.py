"""One GPU run (through the ``device`` tool), no pytest/hypothesis needed there:

1. PTD input preparation: Triton kernel (compiled, CUDA) and torch (CUDA) vs ``reference.ptd``
   on random cases, rows past the total untouched; the 8213-row boundary.
2. HPU device on CUDA vs ``reference.verify`` (injected and keyed noise), and ``verify_static_keyed``
   captured in a CUDA graph, replayed on fresh data, equal to eager.

    python3 tests/platforms/gpu_check.py
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from devices.hpu_device import HpuDevice, pad_batch, verify_static_keyed
from devices.protocol import Noise, VerifyBatch
from devices.ptd import allocate_buffers, prepare_ptd_inputs_torch
from devices.ptd_triton import prepare_ptd_inputs_triton
from reference.ptd import prepare_ptd_inputs
from reference.verify import verify

FIELDS = ("token_ids", "positions", "slot_mapping", "is_mask", "source_index")


def ptd_case(rng):
    batch, block_size, max_model_len = int(rng.integers(1, 40)), int(rng.integers(1, 17)), int(rng.integers(8, 300))
    qlen = rng.integers(1, 8, batch).clip(max=max_model_len)
    rejected = np.array([int(rng.integers(0, q)) for q in qlen])
    first = np.array([int(rng.integers(0, max_model_len - q + 1)) for q in qlen])
    blocks = -(-max_model_len // block_size)
    table = rng.permutation(batch * blocks).reshape(batch, blocks)
    qsl = np.concatenate([[0], np.cumsum(qlen)])
    pos = np.concatenate([np.arange(f, f + q) for f, q in zip(first, qlen)])
    owner = np.repeat(np.arange(batch), qlen)
    arrays = dict(token_ids=rng.integers(0, 1000, len(pos)), positions=pos,
                  slot_mapping=table[owner, pos // block_size] * block_size + pos % block_size,
                  query_start_loc=qsl, num_rejected=rejected, block_table=table)
    kw = dict(block_size=block_size, max_model_len=max_model_len, draft_len=int(rng.integers(0, 6)),
              mask_token_id=7, cap_drafts=bool(rng.integers(0, 2)))
    return arrays, kw


def check_ptd(cases: int) -> int:
    rng, bad = np.random.default_rng(0), 0
    for _ in range(cases):
        arrays, kw = ptd_case(rng)
        want = prepare_ptd_inputs(**arrays, **kw)
        t = {k: torch.tensor(v, dtype=torch.int64, device="cuda") for k, v in arrays.items()}
        for fn in (prepare_ptd_inputs_triton, prepare_ptd_inputs_torch):
            out = fn(**t, **kw, total=want.total, out=allocate_buffers(want.total + 5, "cuda", fill=-7))
            ok = out["query_start_loc"].tolist() == want.query_start_loc.tolist() and all(
                out[f][:want.total].tolist() == getattr(want, f).tolist()
                and (out[f][want.total:] == allocate_buffers(1, fill=-7)[f][0].to("cuda")).all() for f in FIELDS)
            bad += not ok
    return bad


def check_hpu(cases: int) -> tuple[int, int]:
    rng, dev, bad = np.random.default_rng(1), HpuDevice("cuda"), 0
    for _ in range(cases):
        B, V = int(rng.integers(1, 30)), int(rng.choice([7, 64, 1000]))
        k = rng.integers(0, 5, B)
        n = int(k.sum())
        logits = rng.normal(size=(n + B, V)) * 2
        probs = rng.dirichlet(np.ones(V), n) if n else np.zeros((0, V))
        ids = np.array([rng.choice(V, p=p) for p in probs], np.int64)
        batch = VerifyBatch(k, ids, probs, logits, np.where(rng.random(B) < .2, 0.0, rng.uniform(.5, 1.5, B)),
                            np.where(rng.random(B) < .3, rng.integers(1, V + 1, B), 0),
                            np.where(rng.random(B) < .3, rng.uniform(.3, 1, B), 1.0),
                            rng.integers(0, 2**63, B).astype(np.uint64), rng.integers(0, 1000, B))
        noise = Noise(rng.random(n), rng.exponential(size=(B, V)) + 1e-12)
        for nz in (noise, None):
            kw = {} if nz is None else dict(uniforms=nz.uniforms, exponentials=nz.exponentials)
            want = verify(batch.num_draft_tokens, batch.draft_token_ids, batch.draft_probs, batch.target_logits,
                          batch.temperature, batch.top_k, batch.top_p, seeds=batch.seeds, positions=batch.positions,
                          **kw)
            got = dev.verify(batch, nz)
            same = (got.num_accepted == want.num_accepted).all() and (got.output_token_ids == want.output_token_ids).all()
            bad += not same and float(want.margins.min()) > 1e-9
    # CUDA graph: capture once, replay on new data of the same bucket.
    host = pad_batch(batch, 32, 4)
    static = [torch.tensor(host[f], device="cuda") for f in ("draft_ids", "draft_probs", "target_logits",
              "num_draft_tokens", "temperature", "top_k", "top_p")] + [
        torch.zeros(32, dtype=torch.int64, device="cuda"), torch.zeros(32, dtype=torch.int64, device="cuda")]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        verify_static_keyed(*static)                  # warm-up off the default stream
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = verify_static_keyed(*static)
    graph_bad = 0
    for trial in range(5):
        static[2].copy_(torch.randn_like(static[2]))
        static[7].copy_(torch.randint(0, 2**62, (32,), device="cuda"))
        graph.replay()
        eager = verify_static_keyed(*static)
        graph_bad += not (torch.equal(out[0], eager[0]) and torch.equal(out[1], eager[1]))
    return bad, graph_bad


if __name__ == "__main__":
    print(torch.__version__, torch.cuda.get_device_name(0))
    bad_ptd = check_ptd(200)
    bad_hpu, bad_graph = check_hpu(60)
    print(f"ptd: 200 cases, {bad_ptd} disagree (triton+torch vs reference); "
          f"hpu: 60 batches x 2 noise kinds, {bad_hpu} disagree beyond margin 1e-9; cuda-graph replays: {bad_graph} differ")
    sys.exit(int(bool(bad_ptd or bad_hpu or bad_graph)))
