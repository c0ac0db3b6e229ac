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

A row's own floor (``row_floor_bytes``): the algorithmic bytes plus every other
input that row is handed, read once — a SPEC §12 row's logit bias, masks (bit-packed
or int8, as that row takes them), penalties and sparse records, a filter row's
per-request top-k/top-p/min_p — counted from the sizes of the tensors it is passed
(``input_bytes``), and, unless greedy, each request's emitting row's share of them read
again (``emit_row_bytes``: its bias row, mask rows), as the emitting row's logits are.
What a row's kernels write and read back (the fused path's live words, processed rows,
the filters' candidates) is not an input: it is part of the gap between the row's time
and its floor.

``sampler_params`` and ``FILTERS`` are the SPEC §12 workload of ``specsim bench
--sampler all``: every sampler parameter on, at strengths engines use.
"""

from __future__ import annotations

import dataclasses


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


def shape_inputs(torch, batch: int, k: int, vocab: int, dtype, mode: str, l2: int) -> tuple[tuple, list]:
    """``(floor_shape, sets)`` of one shape: ``floor_bytes``' arguments, and as many input sets of ``make_inputs``
    (seeds 0, 1, ...) as ``input_sets`` says a step of that size rotates through past an L2 of ``l2`` bytes."""
    logit_size = torch.empty(0, dtype=dtype).element_size()
    prob_size = torch.empty(0, dtype=draft_dtype(torch, dtype)).element_size()
    floor_shape = (batch, k, vocab, logit_size, prob_size, mode)
    _, all_rows = floor_bytes(*floor_shape)
    return floor_shape, [make_inputs(torch, batch, k, vocab, dtype, mode, seed)
                         for seed in range(input_sets(l2, all_rows))]


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


def _arrays(inputs):
    """Every array in ``inputs`` (a tensor or numpy array, or a tuple, list, NamedTuple, dict or
    dataclass of them, nested; None, numbers and strings hold none), depth first."""
    if inputs is None or isinstance(inputs, (str, bytes, int, float, bool)):
        return
    if hasattr(inputs, "nbytes"):
        yield inputs
    elif isinstance(inputs, dict):
        for v in inputs.values():
            yield from _arrays(v)
    elif dataclasses.is_dataclass(inputs) and not isinstance(inputs, type):
        for f in dataclasses.fields(inputs):
            yield from _arrays(getattr(inputs, f.name))
    elif isinstance(inputs, (tuple, list)):
        for v in inputs:
            yield from _arrays(v)
    else:
        raise TypeError(f"input_bytes: inputs holds a {type(inputs).__name__}; expected arrays, tensors, "
                        "tuples, lists or dicts of them")


def input_bytes(inputs) -> int:
    """Bytes of every array in ``inputs``: a tensor or numpy array (``nbytes``), or a tuple, list,
    NamedTuple, dict or dataclass (``SamplerParams``) of them, nested; None, numbers and strings hold none.

    >>> import numpy as np
    >>> input_bytes({"bias": np.zeros((2, 8), np.float32), "edits": (np.zeros(3, np.int32), None), "order": "vllm"})
    76
    """
    return sum(int(a.nbytes) for a in _arrays(inputs))


def emit_row_bytes(inputs, batch: int, rows: int) -> int:
    """Bytes the emitting rows read again of ``inputs``: one row per request of each 2-D array whose
    rows are per request (``[batch, ·]``: a logit bias, allowed ids) or per target row (``[rows, ·]``:
    a token mask). The row a request emits from is known only once every earlier row's statistics are,
    so its processed values are formed twice, as its logits are read twice (``floor_bytes``).

    >>> import numpy as np
    >>> emit_row_bytes({"bias": np.zeros((2, 8), np.float32), "mask": np.zeros((6, 1), np.int32),
    ...                 "penalty": np.zeros(2)}, batch=2, rows=6)
    72
    """
    return sum(int(a.nbytes) // a.shape[0] * batch for a in _arrays(inputs)
               if len(a.shape) == 2 and a.shape[0] in (batch, rows))


def row_needs_inputs(variant: str) -> bool:
    """Whether row ``variant`` (a ``specsim bench`` row label) is handed inputs beyond the plain step's:
    the SPEC §12 rows (``§12`` in the label) and the filter rows (``filters``).

    >>> row_needs_inputs("triton graph"), row_needs_inputs("triton §12"), row_needs_inputs("vllm filters")
    (False, True, True)
    """
    return "§12" in variant or "filters" in variant


def row_floor_bytes(variant: str, shape: tuple, params=None) -> int:
    """The floor of row ``variant``: ``floor_bytes``' algorithmic bytes of ``shape`` plus every array of
    ``params`` (the row's own inputs beyond the plain step's, as passed to it) read once, and, unless
    greedy, the emitting row's share of them read again (``emit_row_bytes``).

    ``shape``: ``(batch, k, vocab, logit_size, prob_size, mode)`` as ``floor_bytes`` takes them.
    ``params``: None for a plain row; for a §12 or filter row (``row_needs_inputs``) what it is handed,
    e.g. ``devices.triton_sampler.fused_inputs``' tensors, the filters' ``[batch]`` arrays.

    Worked example, batch 2, K 1, V 64, float32, draft mode: the plain step reads the 4 target rows
    (4·64·4 = 1024 B), per request one more target row and one draft row (2·(256 + 256) = 1024 B):
    2048 B. A fused §12 row is also handed a logit bias ``[2, 64]`` float32 (512 B), a bit-packed
    token mask ``[4, 2]`` int32 (32 B) and allowed ids ``[2, 2]`` int32 (16 B), three penalties
    ``[2]`` float64 (48 B) and 3 sparse records (``edit_start [5]`` int64, 40 B; token and code
    ``[3]`` int32, 24 B): 672 B more. Each request's emitting row reads its bias row, its token-mask
    row and its allowed row again: 2·(256 + 8 + 8) = 544 B more.

    >>> import numpy as np
    >>> shape = (2, 1, 64, 4, 4, "draft")
    >>> row_floor_bytes("triton graph", shape)
    2048
    >>> fused = dict(logit_bias=np.zeros((2, 64), np.float32), token_bits=np.zeros((4, 2), np.int32),
    ...              allowed_bits=np.zeros((2, 2), np.int32), penalties=[np.ones(2)] * 3,
    ...              edit_start=np.zeros(5, np.int64), edit_token=np.zeros(3, np.int32),
    ...              edit_code=np.zeros(3, np.int32))
    >>> row_floor_bytes("triton §12", shape, fused)
    3264
    >>> row_floor_bytes("triton filters", shape, dict(top_k=np.full(2, 50), top_p=np.full(2, 0.9)))
    2080
    """
    batch, k, vocab, logit_size, prob_size, mode = shape
    if row_needs_inputs(variant) and params is None:
        raise ValueError(f"row_floor_bytes: row {variant!r} is handed inputs beyond the plain step's "
                         "(§12 parameters or filters): pass them as params")
    if not row_needs_inputs(variant) and params is not None:
        raise ValueError(f"row_floor_bytes: row {variant!r} is a plain step; params must be None")
    emit = 0 if mode == "greedy" else emit_row_bytes(params, batch, batch * (k + 1))
    return floor_bytes(batch, k, vocab, logit_size, prob_size, mode)[0] + input_bytes(params) + emit


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
