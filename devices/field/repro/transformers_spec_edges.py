"""transformers 5.23.0's ``_speculative_sampling`` on the five SPEC §4 / §2 edges where it parts from SPEC.

The evidence behind ``devices/field/transformers_waivers.toml``: each edge is
called the way the ``transformers`` device calls it (``candidate_logits =
log(draft_probs)``, target rows through transformers' own warpers, batch 1),
``SAMPLES`` times with torch seeds 0, 1, ..., and the emitted sequences are
counted beside SPEC's exact law of the same request:

* **draft-prob-zero** — a draft whose draft probability is 0: ``p_i / q_i`` is
  ``inf``, so it is accepted every time; SPEC §4 rejects it. Such a draft
  cannot be drawn from the q it is reported with, and transformers' assistant
  draws its drafts from the scores it reports (``specsim proposer
  transformers-assisted``: ``draft-in-support`` passes at every case);
* **placeholder-point**, **placeholder-full** — SPEC's placeholder id -1 (a
  ragged batch's padding) indexes the *last* column, so a placeholder is
  accepted and emitted as token -1 (one-hot rows), or its NaN row reaches
  ``torch.multinomial`` and raises. transformers never passes a placeholder:
  ``_assisted_decoding`` refuses batch > 1 and calls the function with
  ``candidate_length`` = the real candidates. Called that way (the
  placeholder dropped), the same requests give SPEC's law;
* **top-p-cut-ties** — ``TopPLogitsWarper`` sorts, then cuts at the
  cumulative mass ``<= 1 - top_p``: of tokens tied at the cut it keeps those
  the sort puts last; SPEC §2 keeps every token tied with the cut. With the
  warped row as the target, the step itself is exact (the same warpers define
  transformers' non-speculative law);
* **empty-residual** — a rejected draft whose draft row covers the target
  row (``d ≥ t`` everywhere, by float32 rounding: the drafter's softmax
  rounds the one token the target allows to exactly 1.0 and still drew
  another): ``max(p − q, 0)`` sums to 0, its ``div_`` makes it NaN and
  ``torch.multinomial`` raises; SPEC §4 draws from ``t``. transformers falls
  back to the target row only with ``assistant_ensemble_weight`` set (its
  comment: "Standard (lossless) SD keeps its original behavior").

Run (``pip install transformers==5.23.0 torch``; CPU, seconds; nothing else)::

    python transformers_spec_edges.py [--samples N]

transformers 5.23.0 prints, per edge, ``transformers: {...}`` and ``SPEC: {...}``
(empirical and exact laws of the emitted sequence), and ``placeholder dropped``
rows that match SPEC, and exits 1: every edge's emitted law leaves SPEC's support
(an outcome SPEC never emits, or one SPEC gives probability ≥ 0.1 never seen).
These are semantics differences at SPEC's edges and an input transformers never
passes (devices/field/transformers_waivers.toml), not losses of transformers' own law.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys

try:
    import torch
    from transformers.generation import logits_process as lp
    from transformers.generation.utils import _speculative_sampling
except ImportError as missing:   # exit 3, never 1: a missing dependency is not the bug
    print(f"missing dependency: {missing}")
    sys.exit(3)

SAMPLES = 1000
NAN = float("nan")


def step(drafts: list[int], draft_rows: list[list[float]], target_logits: list[list[float]], top_p: float = 1.0,
         seed: int = 0) -> tuple[int, ...]:
    """One request through ``_speculative_sampling``, as the ``transformers`` device calls it: drafts ``[K]``,
    draft rows ``[K, V]`` (probabilities; ``log`` taken), target logits ``[K + 1, V]``; the emitted tokens."""
    target = torch.tensor(target_logits, dtype=torch.float32)
    if top_p < 1.0:
        target = lp.TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1)(None, target)
    q_logits = torch.log(torch.tensor(draft_rows, dtype=torch.float32).reshape(len(drafts), target.shape[-1]))
    torch.manual_seed(seed)
    valid, _ = _speculative_sampling(torch.tensor([drafts], dtype=torch.long), q_logits[None], len(drafts), target[None])
    return tuple(valid.reshape(-1).tolist())


def law(drafts, draft_rows, target_logits, top_p: float = 1.0) -> dict:
    """The empirical law of the emitted sequence over torch seeds ``0 .. SAMPLES - 1`` (or the error raised)."""
    try:
        counts = collections.Counter(step(drafts, draft_rows, target_logits, top_p, s) for s in range(SAMPLES))
    except RuntimeError as e:
        return {"raises": f"RuntimeError: {e}"}
    return {k: round(v / SAMPLES, 3) for k, v in sorted(counts.items())}


def leaves_support(got: dict, spec: dict) -> bool:
    """Whether the empirical law ``got`` emits an outcome SPEC's law ``spec`` never emits (or raises), or never
    emits one SPEC gives probability ≥ 0.1 (missed with probability ≤ 0.9^SAMPLES)."""
    return any(k not in spec for k in got) or any(p >= 0.1 and k not in got for k, p in spec.items())


def show(name: str, got: dict, spec: dict, dropped: dict | None = None) -> bool:
    """Print one edge (the law transformers emits beside SPEC's); whether it leaves SPEC's support."""
    differs = leaves_support(got, spec)
    print(f"{name}\n  transformers: {got}\n  SPEC:         {spec}\n  {'DIFFERS' if differs else 'agrees'}")
    if dropped is not None:
        print(f"  placeholder dropped (how transformers calls it): {dropped}")
    return differs


def main(argv: list[str]) -> int:
    global SAMPLES
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=SAMPLES, help="torch seeds per edge (default %(default)s)")
    SAMPLES = parser.parse_args(argv).samples
    import transformers
    print(f"transformers {transformers.__version__}, {SAMPLES} torch seeds per edge")
    z = [math.exp(x) for x in (0, 1, 2)]
    differs = [
        show("draft-prob-zero (draft 1 with q(1) = 0; uniform target, V = 4)",
             law([1], [[0.5, 0.0, 0.5, 0.0]], [[0, 0, 0, 0], [0, 0, 0, 0]]),
             {(1,): 0.5, (3,): 0.5}),   # rejected; residual (t - d)+ = [0, 1/4, 0, 1/4], normalised
        show("placeholder-point (draft -1, its row uniform; uniform target, V = 3)",
             law([-1], [[1 / 3] * 3], [[0, 0, 0], [0, 0, 0]]),
             {(0,): 0.333, (1,): 0.333, (2,): 0.333},   # rejected; residual = the whole target row 0
             law([], [], [[0, 0, 0]])),
        show("placeholder-full (drafts [-1, 2], the placeholder's row NaN; target row 0 = softmax [0, 1, 2])",
             law([-1, 2], [[NAN] * 3, [0.2, 0.3, 0.5]], [[0, 1, 2], [0, 0, 0], [0, 0, 0]]),
             {(i,): round(z[i] / sum(z), 3) for i in range(3)},
             law([], [], [[0, 1, 2]])),
        show("top-p-cut-ties (draft 3, target [0.4, 0.2, 0.2, 0.2], top-p 0.5: the cut falls inside the tie)",
             law([3], [[0, 0, 0, 1.0]], [[math.log(p) for p in (0.4, 0.2, 0.2, 0.2)], [0, 0, 0, 0]], top_p=0.5),
             {(0,): 0.4, (1,): 0.2, (2,): 0.2, **{(3, j): 0.05 for j in range(4)}}),   # SPEC §2 keeps the tie
        show("empty-residual (draft 3, target [0, 0, 1, 0], draft row softmax [-30, -30, 0, -30] in float32: "
             "[9.4e-14, 9.4e-14, 1.0, 9.4e-14], d >= t everywhere)",
             law([3], torch.tensor([[-30.0, -30.0, 0.0, -30.0]]).softmax(dim=-1).tolist(),
                 [[-math.inf, -math.inf, 0, -math.inf], [0, 0, 0, 0]]),
             {(2,): 1.0}),   # rejected (t(3) = 0); the residual is empty: SPEC §4 draws from t
    ]
    print(f"{sum(differs)} of {len(differs)} edges leave SPEC's support")
    return 1 if any(differs) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
