"""The L3 group, the case list and the mutant walk, at quick sizes (harness tests, not verdicts)."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.conformance.cases import chain as C
from specsim.conformance.stats import l3_design as P
from specsim.conformance.checks.chain import statistical as S
from specsim.conformance.run.runner import Context
from specsim.mutants.walk import Hooks, WalkDevice


def test_case_list_is_frozen_and_diverse():
    ids = [c.id for c in C.CASES]
    assert len(ids) == len(set(ids))
    Vs = {c.vocab_size for c in C.CASES}
    assert min(Vs) == 8 and 1024 in Vs and max(Vs) >= 32768
    assert any(c.point for c in C.CASES) and any(c.pit for c in C.CASES)
    assert any(r.temperature == 0 for c in C.CASES for r in c.requests)
    b1, b2 = C.build(C.CASES[0]), C.build(C.CASES[0])
    assert np.array_equal(b1.target_logits, b2.target_logits)  # content is a function of the id only


def test_default_design_detects_tv_002_everywhere():
    plan = P.make_plan(1e-3, quick=False)  # asserts the design itself
    assert plan.checks == sum(len(P.check_names(c)) for c in C.CASES)
    for cp in plan.cases:
        if not cp.case.pit:
            assert max(cp.design_tv.values()) <= P.TARGET_TV * 1.0001


def _small(ids):
    return [c for c in C.CASES if c.id in ids]


def test_quick_group_passes_correct_walk_and_fills_fields():
    res = S.statistical_group(WalkDevice(), Context(seed=0, quick=True), cases={"v8-hetero", "v8-point"})
    assert res and all(r.status == "pass" for r in res), [r.detail for r in res if r.status != "pass"]
    stat = [r for r in res if r.p_value is not None]
    assert stat and all(r.alpha and r.n and r.seed is not None and r.layer == "L3" for r in stat)
    assert any(r.name.endswith("-bonus") for r in stat)
    assert any(r.name.endswith("greedy-exact") for r in res)


@pytest.mark.parametrize("hooks", [Hooks(residual="target"), Hooks(residual_row_shift=1),
                                   Hooks(count_after_rejection=True)])
def test_quick_group_kills_inside_bugs(hooks):
    res = S.statistical_group(WalkDevice(hooks), Context(seed=0, quick=True), cases={"v8-hetero"})
    assert any(r.status == "fail" for r in res)


def test_rng_none_is_not_supported():
    class NoRng:
        name = "x"
        from devices.protocol import Capabilities
        capabilities = Capabilities(injected_noise=True, rng="none", max_vocab_size=10)
    res = S.statistical_group(NoRng(), Context(quick=True))
    assert [r.status for r in res] == ["not_supported"]


def test_a_batch_limit_of_its_own_is_a_refusal_inside_the_declaration_and_fails():
    """Batch size is never a declared limit (SPEC §10): the case's calls are not retried smaller, and
    every check of the case fails naming the batch and the device's own words."""
    from devices.protocol import UnsupportedCall

    class Small(WalkDevice):
        def verify(self, batch, noise=None):
            if batch.batch_size > 100:
                raise UnsupportedCall("batch <= 100", batch.batch_size)
            return super().verify(batch, noise)

    res = S.statistical_group(Small(), Context(seed=0, quick=True), cases={"v8-far"})
    assert [r.name for r in res] == P.check_names(next(c for c in C.CASES if c.id == "v8-far"))
    assert all(r.status == "fail" for r in res)
    assert "device refused a call inside its declaration (B=" in res[0].detail
    assert "batch size is never a declared limit" in res[0].detail and "batch <= 100 (got" in res[0].detail
