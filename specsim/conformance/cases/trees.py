"""The frozen case list of L3-trees (SPEC §11): each case's tree template, its rows, and its exact laws.

A case is one tree template (shape, V, scheme, drafting, sampling
parameters) whose target and drafter rows depend on the accepted prefix (a
row per prefix, drawn from the case seed). The group that samples them is
``tree_statistics``; the run-wide plan (``stat_plan``) reads this list to
give each case's checks their α and trial count, so a case added here is
planned and budgeted with no other change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.target import target_probs
from reference.tree import accepted_length_law, tree_law
from specsim.testing.batches import softmax_rows
from specsim.testing.seeds import case_seed

TARGET_TV = 0.03
"""Worst-case TV on a case's path law that its design detects with power 1 − β (full size), unless the
case sets its own ``target_tv``: below the 0.047 by which siblings verified with their parent's row though
drafted without replacement move a path law (docs/bugs.md C10)."""
QUICK_TRIALS = 2000
CHECKS = ("path", "accepted")
"""The statistical checks of every case (``support`` is exact and spends no α)."""


@dataclass(frozen=True)
class TreeCase:
    id: str
    parents: tuple
    V: int
    scheme: str = "rrs"
    drafting: str = "with_replacement"
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    threshold_single: float = 1.0
    threshold_acc: float = 1.0
    draft_top_k: int = 0            # the drafter's row cut to its top k tokens (0: whole row)
    target_tv: float = TARGET_TV    # the worst-case TV on the path law the trials are sized to detect

    @property
    def needs(self) -> str:
        return self.scheme


CASES = [
    TreeCase("rrs-with-replacement", (-1, -1, 0, 1), 5),
    TreeCase("rrs-without-replacement", (-1, -1, -1, 0), 4, drafting="without_replacement"),
    TreeCase("rrs-point-top-p", (-1, -1, 0, 0), 5, drafting="top", top_p=0.9, temperature=0.8),
    TreeCase("sglang", (-1, -1, 0), 5, scheme="sglang", drafting="top"),
    TreeCase("sglang-relaxed", (-1, -1, 0), 5, scheme="sglang", drafting="top", threshold_single=0.5,
             threshold_acc=0.8),
    TreeCase("rrs-without-replacement-wide", (-1, -1, -1, 0, 0, 1), 5, drafting="without_replacement"),
    TreeCase("rrs-placeholders", (-1, -1, -1, 0), 4, drafting="without_replacement", draft_top_k=2),
    TreeCase("sglang-duplicates", (-1, -1, -1, 0), 4, scheme="sglang", drafting="with_replacement"),
    TreeCase("rrs-leaves-every-depth", (-1, -1, 0, 0, 2, 2, 4), 4, drafting="without_replacement"),
    TreeCase("rrs-eight-nodes", (-1, -1, -1, 0, 0, 1, 3, 3), 4),
]
"""Shapes of up to 8 nodes and depth 4: siblings drawn with and without replacement, top-k with top-p,
sglang (lossless, relaxed, and with duplicate siblings drawn with replacement), placeholders (a drafter
cut to its top 2 tokens gives its third sibling none to draw), leaves at depths 1 to 4."""


def case_name(case: TreeCase) -> str:
    """The case's check prefix, ``L3/trees/<id>``; its seed is ``case_seed(suite seed, case_name(case))``."""
    return f"L3/trees/{case.id}"


def check_names(case: TreeCase) -> list[str]:
    """The case's statistical checks (they spend α)."""
    return [f"{case_name(case)}/{what}" for what in CHECKS]


class PrefixRows:
    """A case's rows per accepted prefix, drawn on first use from the case seed: raw target logits,
    target_probs (§2), and the drafter's law."""

    def __init__(self, case: TreeCase, seed: int):
        self.case, self.seed, self.logits, self.drafter = case, seed, {}, {}

    def target_logits(self, prefix: tuple) -> np.ndarray:
        if prefix not in self.logits:
            rng = np.random.default_rng(case_seed(self.seed, f"target{prefix}"))
            self.logits[prefix] = rng.normal(0.0, 1.5, self.case.V)
        return self.logits[prefix]

    def target(self, prefix: tuple) -> np.ndarray:
        c = self.case
        return target_probs(self.target_logits(prefix), c.temperature, c.top_k, c.top_p)

    def draft(self, prefix: tuple) -> np.ndarray:
        if prefix not in self.drafter:
            rng = np.random.default_rng(case_seed(self.seed, f"draft{prefix}"))
            noisy = self.target_logits(prefix) / self.case.temperature + rng.normal(0.0, 0.8, self.case.V)
            row = softmax_rows(noisy[None, :])[0]
            if self.case.draft_top_k:
                row[np.argsort(-row, kind="stable")[self.case.draft_top_k:]] = 0.0
                row = row / row.sum()
            self.drafter[prefix] = row
        return self.drafter[prefix]


def laws(case: TreeCase, rows: PrefixRows) -> tuple[dict, np.ndarray]:
    """(path law ``{tuple: prob}``, accepted-length law ``[depth + 1]``), exact enumeration in float64."""
    law = tree_law(list(case.parents), rows.target, rows.draft, case.scheme, case.drafting, case.threshold_single,
                   case.threshold_acc, exact=False)
    return law, np.array(accepted_length_law(law, list(case.parents)), dtype=np.float64)


__all__ = ["TARGET_TV", "QUICK_TRIALS", "CHECKS", "TreeCase", "CASES", "case_name", "check_names", "PrefixRows",
           "laws"]
