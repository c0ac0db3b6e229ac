"""The mutant zoo: at least 20 mutants, each citing a report, each wrapping the device it is given."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.mutants.walk import WalkDevice
from specsim.mutants.zoo import MUTANT_CLASSES, MUTANTS, make_mutants
from specsim.testing.batches import BatchSpec, random_batch


def test_zoo_size_and_citations():
    assert len(MUTANTS) >= 20
    for cls in MUTANT_CLASSES:
        assert cls.bug and cls.models and cls.id in MUTANTS
        assert any(ch.isdigit() for ch in cls.models) or "§" in cls.models  # names a report or section


def test_mutants_keep_capabilities_and_differ_from_the_base():
    base = WalkDevice()
    rng = np.random.default_rng(0)
    batches = []
    for s in range(6):
        b = random_batch(rng, BatchSpec(batch=8, max_k=4, vocab_size=12, draft_probs=bool(s % 2),
                                        placeholder_fraction=0.1))
        batches.append(type(b)(**{**b.__dict__, "seeds": rng.integers(0, 2**63, 8, dtype=np.uint64),
                                  "positions": rng.integers(0, 2**31, 8)}))
    differing = 0
    for m in make_mutants(base):
        assert m.capabilities == base.capabilities
        differing += any(not np.array_equal(m.verify(b).output_token_ids, base.verify(b).output_token_ids)
                         or not np.array_equal(m.verify(b).num_accepted, base.verify(b).num_accepted)
                         for b in batches)
    assert differing >= 12  # the rest need edges (u = 0, ties, placeholders) or RNG contracts to show


@pytest.mark.slow
def test_every_mutant_is_killed_quick():
    from devices.registry import load
    from specsim.conformance.runner import Context
    from specsim.mutants.runner import judge_mutant
    base = load("torch")
    for m in make_mutants(base):
        assert judge_mutant(m, Context(quick=True)).killed, m.id


def test_walk_without_hooks_is_the_reference():
    """The numpy walk the 'inside' mutants recompute with is correct when no hook is on."""
    from reference.verify import verify
    dev = WalkDevice()
    for s in range(60):
        rng = np.random.default_rng(s)
        b = random_batch(rng, BatchSpec(batch=6, max_k=4, vocab_size=int(rng.integers(2, 40)),
                                        draft_probs=bool(s % 3)))
        seeds, positions = rng.integers(0, 2**63, 6, dtype=np.uint64), rng.integers(0, 2**31, 6)
        b = type(b)(**{**b.__dict__, "seeds": seeds, "positions": positions})
        out = dev.verify(b)
        ref = verify(b.num_draft_tokens, b.draft_token_ids, b.draft_probs, b.target_logits, b.temperature,
                     b.top_k, b.top_p, seeds=seeds, positions=positions)
        assert np.array_equal(out.output_token_ids, ref.output_token_ids), s
        assert np.array_equal(out.num_accepted, ref.num_accepted), s
