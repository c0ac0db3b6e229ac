"""Mutant proposers: a q the drafter did not sample from, each a cited source edit of
``specsim/engine/proposers/processed.py`` (``specsim.mutants.source``), killed by ``specsim proposer``
and, as the ``proposer`` family (``specsim.mutants.families``), by ``specsim mutants``.

| id | the edit | models | killed by |
|---|---|---|---|
| `q-before-processors` | `draft_probs` is the row before top-k/top-p; drafts come from the row after | docs/bugs.md #41 | `law/position-*`, `declared-sampling` (case T0.9-k3) |
| `reduced-precision-draws` | drafts drawn from bfloat16-rounded logits; `draft_probs` from the float64 ones | docs/bugs.md #44 | `law/position-*` (case T0.7, on logits of mean 40) |

Each mutant's size is exact: ``position0_tv`` is the TV between the row its
drafts are drawn from and the row it reports, for the check's first draft of a
case; the CI test (tests/test_proposer_mutants.py) holds the check's stated
detectable TV below it and the mutant killed by its named check.

>>> make("q-before-processors").name
'mutant:q-before-processors'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specsim.mutants.source import Edit, SourceMutant, load_copy

MODULE = "specsim.engine.proposers.processed"

_SAMPLED = ('"""The rows ``[B, V]`` the drafts are drawn from."""\n'
            '        return processed_law(logits, temperature, top_k, top_p)')
_REPORTED = ('"""The rows ``[B, V]`` returned as ``draft_probs`` (here: the same rows)."""\n'
             '        return processed_law(logits, temperature, top_k, top_p)')


@dataclass(frozen=True)
class ProposerMutant:
    """One proposer bug: the ``SourceMutant`` (anchors checked exactly) and the drafter it runs on."""

    source: SourceMutant
    drafter: str        # "module:function" of specsim.engine.proposers.checked building the ToyLM
    case: str           # the check's case whose first draft ``position0_tv`` measures
    killed_by: str


def bfloat16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 (round to nearest even on float32's top 16 bits), back as float64.

    >>> bfloat16(np.array([40.1, 40.2, 1.0 + 2 ** -9])).tolist()
    [40.0, 40.25, 1.0]
    """
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


MUTANTS = {m.source.id: m for m in (
    ProposerMutant(SourceMutant(
        "q-before-processors", "draft_probs is the drafter's row before top-k/top-p; drafts are drawn after them",
        "docs/bugs.md #41", MODULE,
        (Edit(_REPORTED, _REPORTED.replace("top_k, top_p)", "np.zeros_like(top_k), np.ones_like(top_p))")),),
        killed_by="law/position-0"), "processed_draft", "T0.9-k3", "law/position-0"),
    ProposerMutant(SourceMutant(
        "reduced-precision-draws", "drafts drawn from bfloat16-rounded logits, draft_probs from the float64 logits",
        "docs/bugs.md #44", MODULE,
        (Edit("from specsim.engine.state import Request\n",
              "from specsim.engine.state import Request\nfrom specsim.mutants.proposers import bfloat16\n"),
         Edit(_SAMPLED, _SAMPLED.replace("processed_law(logits,", "processed_law(bfloat16(logits),"))),
        killed_by="law/position-0"), "large_logits_draft", "T0.7", "law/position-0"),
)}


def make(mutant_id: str):
    """The mutant proposer: the drafter of its case, built by the edited copy of ``processed.py``."""
    if mutant_id not in MUTANTS:
        raise ValueError(f"mutant: {mutant_id!r} is not a proposer mutant ({', '.join(sorted(MUTANTS))})")
    m = MUTANTS[mutant_id]
    module = load_copy(m.source, MODULE, m.source.mutated_source(), {})
    from specsim.engine.proposers import checked
    proposer = module.ProcessedDraftProposer(getattr(checked, m.drafter)().draft)
    proposer.name = f"mutant:{mutant_id}"
    proposer.mutant = m
    return proposer


def position0_tv(proposer, context, params) -> float:
    """TV between the row ``proposer`` draws its first draft from and the row it reports, for ``context``."""
    lm = proposer.draft
    logits = lm.logits_at(np.array([lm.key_of(list(context))]), np.array([len(context)]))
    args = [np.array([params.temperature]), np.array([params.top_k]), np.array([params.top_p])]
    return 0.5 * float(np.abs(proposer.sampled_law(logits, *args) - proposer.reported_law(logits, *args)).sum())


__all__ = ["MUTANTS", "ProposerMutant", "bfloat16", "make", "position0_tv"]
