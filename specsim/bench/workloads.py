"""What a benchmarked verification step reads: its inputs, its bytes, and its bandwidth floors.

Inputs (``make_inputs``): random target logits (normal × 2, in the logits'
dtype), never-zero random draft probabilities (a softmax of normals; float32
with 16-bit logits), random drafts, keyed Philox noise (SPEC §5.2): seeds and
positions per request. ``input_sets`` says how many distinct sets a shape
rotates through so that each call reads memory, not L2.

Bytes (``floor_bytes``), two floors over the measured copy bandwidth:

* **algorithmic**: the bytes the algorithm cannot avoid — every target row once
  (each row's softmax statistics or greedy argmax), plus, per random request,
  the one target row it emits from and, with draft probabilities, the one draft
  row of its residual; acceptance itself needs only gathers ``t(x)``, ``d(x)``;
* **all rows**: every target logit and every draft probability read once —
  more than the algorithm needs with draft probabilities, so a step can beat it.

``sampler_params`` and ``FILTERS`` are the SPEC §12 workload of ``specsim bench
--sampler all``: every sampler parameter on, at strengths engines use.
"""

from __future__ import annotations


def draft_dtype(torch, logits_dtype):
    """Draft probabilities' dtype: the logits' for float32/float64, float32 for 16-bit logits."""
    return logits_dtype if logits_dtype in (torch.float32, torch.float64) else torch.float32


def make_inputs(torch, batch: int, k: int, vocab: int, dtype, mode: str, seed: int) -> dict:
    """One input set on the GPU: ``target_logits`` ``[batch·(k+1), V]`` in ``dtype``, ``draft_probs``
    ``[batch·k, V]`` (softmax of normals: never zero) or None, drafts, temperature, keyed noise."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = batch * k
    logits = (torch.randn(n + batch, vocab, device="cuda", dtype=torch.float32, generator=g) * 2).to(dtype)
    draft = torch.softmax(torch.randn(n, vocab, device="cuda", dtype=draft_dtype(torch, dtype), generator=g) * 2,
                          dim=1) if mode == "draft" else None
    temperature = torch.full((batch,), 0.0 if mode == "greedy" else 1.0, device="cuda", dtype=torch.float64)
    return dict(num_draft_tokens=torch.full((batch,), k, device="cuda", dtype=torch.int64),
                cu=torch.arange(batch + 1, device="cuda", dtype=torch.int64) * k,
                draft_token_ids=torch.randint(0, vocab, (n,), device="cuda", generator=g),
                draft_probs=draft, target_logits=logits, temperature=temperature,
                seeds=torch.randint(-2**62, 2**62, (batch,), device="cuda", generator=g),
                positions=torch.randint(0, 2**20, (batch,), device="cuda", generator=g), max_k=k, mode=mode)


def floor_bytes(batch: int, k: int, vocab: int, logit_size: int, prob_size: int, mode: str) -> tuple[int, int]:
    """``(algorithmic, all_rows)`` bytes of one step.

    Algorithmic: every target row once, plus per random request one target row
    (the row it emits from) and, with draft probabilities, one draft row.
    All rows: every target row and every draft row once.

    >>> [round(b / 1e6) for b in floor_bytes(256, 4, 128256, 4, 4, "draft")]
    [919, 1182]
    >>> [round(b / 1e6) for b in floor_bytes(256, 4, 128256, 4, 4, "point")]
    [788, 657]
    """
    target = batch * (k + 1) * vocab * logit_size
    emit = 0 if mode == "greedy" else batch * vocab * logit_size
    draft_row = batch * vocab * prob_size if mode == "draft" else 0
    all_drafts = batch * k * vocab * prob_size if mode == "draft" else 0
    return target + emit + draft_row, target + all_drafts


def input_sets(l2_bytes: int, all_rows_bytes: int) -> int:
    """Distinct input sets a shape rotates through: at least four times L2 of data per rotation, 2 to 8 sets.

    >>> input_sets(50 << 20, 1_182_000_000), input_sets(50 << 20, 60_000_000)
    (2, 4)
    """
    return max(2, min(8, -(-4 * l2_bytes // all_rows_bytes)))


FILTERS = dict(top_k=50, top_p=0.9, min_p=0.05)
"""The filters of the ``filters`` rows: top-k and top-p, and min_p where §12 is on."""


def sampler_params(batch: int, k: int, vocab: int, draft_token_ids, seed: int, prompt: int = 512, output: int = 64):
    """``devices.protocol.SamplerParams`` with every SPEC §12 parameter on, at strengths engines use:
    a ``prompt``-token prompt and an ``output``-token output per request (repetition 1.1, frequency
    0.2, presence 0.1 on them and the drafts), four bad words of 2–3 tokens each ending in the
    request's first draft's prefix (so some complete along the drafts), min_tokens past this step
    with two stop ids, a logit bias on every entry (``N(0, 0.1)``), allowed ids (a random 90 %),
    a token mask per row (a random 95 %), min_p 0.05 (the ``vllm`` order).
    ``draft_token_ids``: ``[batch·k]`` int."""
    import numpy as np

    from devices.protocol import SamplerParams
    rng = np.random.default_rng(seed)
    ids = lambda n: rng.integers(0, vocab, n)  # noqa: E731
    drafts = np.asarray(draft_token_ids).reshape(batch, k)
    words = tuple(tuple(np.array([*ids(n - 2), drafts[i, 0], ids(1)[0]]) for n in (2, 3, 2, 3)) for i in range(batch))
    return SamplerParams(
        order="vllm", prompt_token_ids=tuple(ids(prompt) for _ in range(batch)),
        output_token_ids=tuple(ids(output) for _ in range(batch)),
        token_mask=rng.random((batch * (k + 1), vocab)) < 0.95,
        allowed_token_ids=tuple(np.flatnonzero(rng.random(vocab) < 0.9) for _ in range(batch)), bad_words=words,
        min_tokens=np.full(batch, output + k + 1), stop_token_ids=tuple(ids(2) for _ in range(batch)),
        logit_bias=rng.normal(0, 0.1, (batch, vocab)).astype(np.float32),
        repetition_penalty=np.full(batch, 1.1), frequency_penalty=np.full(batch, 0.2),
        presence_penalty=np.full(batch, 0.1), min_p=np.full(batch, FILTERS["min_p"]))
