"""Spec-decode metrics, seed 000's names, counted from **emitted** tokens.

A round is one verification of one request. For a round with ``k ≥ 1``
drafts that accepted ``a`` and emitted ``e`` tokens after trimming (tokens
after EOS, past ``max_tokens`` or past ``max_model_len`` are not emitted):

* ``num_drafts`` += 1; ``num_draft_tokens`` += k;
* the accepted drafts that count are the emitted ones, ``min(a, e)``:
  ``acc_counts[j]`` += 1 for each ``j < min(a, e)`` (vLLM #56101: drafts
  accepted after an EOS are not counted; #4: only the accepted prefix);
* ``acc_rate = Σ acc_counts / num_draft_tokens``;
* ``mean_acceptance_length`` = tokens emitted by rounds with drafts /
  ``num_drafts`` (= vLLM's ``1 + accepted / num_drafts`` when nothing is
  trimmed); ``emitted_tokens`` counts every emitted token, rounds without
  drafts included.

>>> m = SpecDecodeMetrics(num_speculative_tokens=2)
>>> m.record(k=2, num_accepted=2, emitted=3); m.record(k=2, num_accepted=1, emitted=1)
>>> m.as_dict()["acc_counts"], m.as_dict()["mean_acceptance_length"]
([2, 1], 2.0)
"""

from __future__ import annotations

import json


class SpecDecodeMetrics:
    KEYS = ("acc_counts", "acc_rate", "num_draft_tokens", "num_drafts", "mean_acceptance_length", "emitted_tokens")

    def __init__(self, num_speculative_tokens: int):
        self.acc_counts = [0] * num_speculative_tokens
        self.num_drafts = self.num_draft_tokens = self.emitted_tokens = 0
        self.emitted_in_draft_rounds = 0
        self.rounds: list[tuple[int, int, int]] = []  # (k, num_accepted, emitted) of every round

    def record(self, k: int, num_accepted: int, emitted: int) -> None:
        if not 0 <= num_accepted <= k or not 0 <= emitted <= num_accepted + 1:
            raise ValueError(f"record: need 0 <= num_accepted <= k and emitted <= num_accepted + 1, "
                             f"got k={k}, num_accepted={num_accepted}, emitted={emitted}")
        self.rounds.append((k, num_accepted, emitted))
        self.emitted_tokens += emitted
        if k == 0:
            return
        if k > len(self.acc_counts):
            self.acc_counts.extend([0] * (k - len(self.acc_counts)))
        self.num_drafts += 1
        self.num_draft_tokens += k
        self.emitted_in_draft_rounds += emitted
        for j in range(min(num_accepted, emitted)):
            self.acc_counts[j] += 1

    @property
    def acc_rate(self) -> float:
        return sum(self.acc_counts) / self.num_draft_tokens if self.num_draft_tokens else 0.0

    @property
    def mean_acceptance_length(self) -> float:
        return self.emitted_in_draft_rounds / self.num_drafts if self.num_drafts else 0.0

    def as_dict(self) -> dict:
        return {"acc_counts": list(self.acc_counts), "acc_rate": self.acc_rate,
                "num_draft_tokens": self.num_draft_tokens, "num_drafts": self.num_drafts,
                "mean_acceptance_length": self.mean_acceptance_length, "emitted_tokens": self.emitted_tokens}

    def format(self) -> str:
        """Seed 000's print format, then the two derived lines."""
        return "\n".join(f"{k}: {v}" for k, v in self.as_dict().items())

    def to_json(self) -> str:
        return json.dumps(self.as_dict())
