"""The proposers ``specsim proposer`` knows by name, built on toy drafters of V = 8 (small enough that the
law of every draft, given its prefix, is tested cell by cell).

A name maps to ``"module:attr"``; ``load`` takes a name or any ``module:attr``
(a proposer, or a function of no arguments returning one), as device specs do.

>>> load("ngram").has_probs, sorted(PROPOSERS)[:3]
(False, ['draft_model', 'draft_model-point', 'large_logits_draft'])
"""

from __future__ import annotations

import numpy as np

from devices.registry import resolve

from specsim.engine.models import ToyLM
from specsim.engine.proposers.draft_model import DraftModelProposer
from specsim.engine.proposers.factory import make_platform_proposer
from specsim.engine.proposers.ngram import NgramProposer
from specsim.engine.proposers.processed import ProcessedDraftProposer
from specsim.engine.proposers.ptd import PtdProposer

VOCAB_SIZE = 8


def draft_model():
    return DraftModelProposer(ToyLM(VOCAB_SIZE, order=2, seed=11))


def draft_model_point():
    return DraftModelProposer(ToyLM(VOCAB_SIZE, order=2, seed=11), use_probs=False, point_drafts="sample")


def ptd():
    return PtdProposer(ToyLM(VOCAB_SIZE, order=2, seed=12))


def universal():
    return make_platform_proposer("universal", ToyLM(VOCAB_SIZE, order=2, seed=13), seed=13)


def ngram():
    return NgramProposer(VOCAB_SIZE)


def processed_draft():
    return ProcessedDraftProposer(ToyLM(VOCAB_SIZE, order=2, seed=14))


def large_logits_lm(seed: int = 15) -> ToyLM:
    """A drafter whose logits sit where LLMs' do (mean 40, sd 3): bfloat16 spaces them 0.25 apart."""
    rows = (VOCAB_SIZE + 1) ** 2
    table = 40.0 + 3.0 * np.random.default_rng(seed).standard_normal((rows, VOCAB_SIZE))
    return ToyLM(VOCAB_SIZE, order=2, seed=seed, table=table)


def large_logits_draft():
    return ProcessedDraftProposer(large_logits_lm())


PROPOSERS = {
    "draft_model": "specsim.engine.proposers.checked:draft_model",
    "draft_model-point": "specsim.engine.proposers.checked:draft_model_point",
    "ptd": "specsim.engine.proposers.checked:ptd",
    "universal": "specsim.engine.proposers.checked:universal",
    "ngram": "specsim.engine.proposers.checked:ngram",
    "processed_draft": "specsim.engine.proposers.checked:processed_draft",
    "large_logits_draft": "specsim.engine.proposers.checked:large_logits_draft",
}
"""The project's own proposers (each must pass ``specsim proposer``); their mutants (``mutant:ID``) are
``specsim.mutants.proposers``."""

FIELD = {
    "transformers-assisted": "specsim.field.engines.hf_candidates:make_proposer",
    "transformers-gemma4-assistant": "specsim.field.engines.hf_gemma4_assistant:make_proposer",
}
"""The field's proposers (their packages are optional extras): what ``specsim proposer`` finds is in docs/field.md."""


def load(spec: str):
    """A proposer from a registered name or ``module:attr`` (a factory, called, or a proposer)."""
    target = PROPOSERS.get(spec) or FIELD.get(spec, spec)
    if ":" not in target:
        raise ValueError(f"proposer: {spec!r} is neither a registered name ({', '.join(sorted(PROPOSERS))}) "
                         f"nor module:attr")
    obj = resolve(target, "proposer")
    return obj() if callable(obj) and not hasattr(obj, "propose") else obj


__all__ = ["PROPOSERS", "FIELD", "VOCAB_SIZE", "load", "large_logits_lm"]
