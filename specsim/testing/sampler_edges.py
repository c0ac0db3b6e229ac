"""Hand-built SPEC §12 edges, each with the exact answer (issue 18).

Each edge is a batch of ``specsim.testing.edges.Request`` s, the sampler parameters that act on
it, the order profiles it holds in, and the tokens every request must emit. The values leave
wide gaps (no near-tie in float32 or float64): a banned draft has target probability exactly 0,
so it is rejected at ``u = 0`` and its residual never recovers it, however the exponentials
favour it (``E = 0.001`` on the banned token).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from devices.protocol import Noise, SamplerParams, VerifyBatch
from specsim.testing.edges import Request, make_batch

FAVOUR = 0.001
"""An exponential that makes a token win any race it may enter."""


@dataclass(frozen=True)
class SamplerEdge:
    name: str
    why: str
    requests: list
    sampler: SamplerParams
    expected: list                   # per request: the emitted tokens
    needs: frozenset                 # of SAMPLER_PARAMETERS (and §2 modes: "top_k")
    orders: tuple = ("canonical", "vllm")  # every edge so far holds in both profiles

    def batch(self, order: str, dtype: str = "float64") -> tuple[VerifyBatch, Noise]:
        """The edge's batch (its sampler in ``order``) and injected noise."""
        batch, noise = make_batch(self.requests, dtype=dtype, point=False)
        return replace(batch, sampler=replace(self.sampler, order=order)), noise


def _ids(*lists) -> tuple:
    return tuple(np.array(ids, dtype=np.int64) for ids in lists)


Z = [0.0, 0.0, 0.0, 0.0]
SAMPLER_EDGES = [
    SamplerEdge("mask-forbids-draft",
                "the mask of row 1 bans draft 1 (target logit 3): rejected at u = 0, the residual races 0, 2, 3 "
                "and emits 2; a mask taken from row 0 or applied to the bonus row only would accept it",
                [Request([0, 1], [Z, [0, 3, 0, 0], Z], uniforms=[0, 0], exponentials=[1, FAVOUR, 0.5, 1])],
                SamplerParams(token_mask=np.array([[1, 1, 1, 1], [1, 0, 1, 1], [1, 1, 1, 1]], dtype=bool)),
                [[0, 2]], frozenset({"token_mask"})),
    SamplerEdge("allowed-ids-forbid-draft",
                "allowed ids {0, 2, 3}: draft 1 (target logit 3) is rejected at u = 0 and never recovered; emits 2",
                [Request([1], [[0, 3, 0, 0], Z], uniforms=[0], exponentials=[1, FAVOUR, 0.5, 1])],
                SamplerParams(allowed_token_ids=_ids([0, 2, 3])), [[2]], frozenset({"allowed_token_ids"})),
    SamplerEdge("bad-word-completed-by-drafts",
                "bad word [0, 1, 2] completed by this step's drafts: rows 0, 1 accept, row 2 bans 2 (rejected at "
                "u = 0, emits 3); matching against the pre-step output [] would accept it",
                [Request([0, 1, 2], [[3, 0, 0, 0], [0, 3, 0, 0], [0, 0, 3, 0], Z], uniforms=[0, 0, 0],
                         exponentials=[1, 1, FAVOUR, 0.5])],
                SamplerParams(bad_words=((np.array([0, 1, 2]),),)), [[0, 1, 3]], frozenset({"bad_words"})),
    SamplerEdge("min-tokens-crossing",
                "min_tokens 2 after output [2], stop [3]: request 0's row 0 (length 1) bans draft 3 (emits 1); "
                "request 1 accepts draft 1, then at length 2 accepts draft 3 and its bonus row emits 3",
                [Request([3], [[0, 0, 0, 3], Z], uniforms=[0], exponentials=[1, 0.5, 1, FAVOUR]),
                 Request([1, 3], [Z, [0, 0, 0, 3], Z], uniforms=[0, 0], exponentials=[1, 0.5, 1, FAVOUR])],
                SamplerParams(output_token_ids=_ids([2], [2]), min_tokens=np.array([2, 2]),
                              stop_token_ids=_ids([3], [3])), [[1], [1, 3, 3]], frozenset({"min_tokens"})),
    SamplerEdge("penalty-zeroes-draft",
                "repetition 2 with top-k 1 on logits [0, 2, 1.5, 0]: token 1, in request 0's prompt or request 1's "
                "draft 0, falls to 1 < 1.5 and top-k removes it — target probability 0, rejected, emits 2",
                [Request([1], [[0, 2, 1.5, 0], Z], top_k=1, uniforms=[0], exponentials=[1, FAVOUR, 1, 1]),
                 Request([1, 1], [[0, 2, 1.5, 0], [0, 2, 1.5, 0], Z], top_k=1, uniforms=[0, 0],
                         exponentials=[1, FAVOUR, 1, 1])],
                SamplerParams(prompt_token_ids=_ids([1], []), repetition_penalty=np.array([2.0, 2.0])),
                [[2], [1, 2]], frozenset({"repetition_penalty", "top_k"})),
    SamplerEdge("bonus-row-sees-all-drafts",
                "presence 5 with top-k 1: drafts [0, 1] are accepted; the bonus row [2, 2.5, 1, 0] sees both, "
                "[−3, −2.5, 1, 0], and emits 2 (seeing fewer drafts it would emit 1)",
                [Request([0, 1], [[3, 0, 0, 0], [0, 3, 0, 0], [2, 2.5, 1, 0]], top_k=1, uniforms=[0, 0])],
                SamplerParams(presence_penalty=np.array([5.0])), [[0, 1, 2]],
                frozenset({"presence_penalty", "top_k"})),
    SamplerEdge("min-p-after-temperature",
                "T = 2, min_p 0.5 on logits [2, 0.8, −5, −5]: after temperature token 1 has e^−0.6 = 0.55 of the "
                "max and is kept (draft 1 accepted; the bonus row emits 1); min_p before temperature "
                "(e^−1.2 = 0.30) would reject it",
                [Request([1], [[2, 0.8, -5, -5], Z], temperature=2.0, uniforms=[0], exponentials=[1, 0.5, 1, 1])],
                SamplerParams(min_p=np.array([0.5])), [[1, 1]], frozenset({"min_p"})),
]
"""The issue's edges by name; ``specsim.conformance.sampler`` runs each in every order it holds in."""
