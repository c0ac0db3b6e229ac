"""SPEC §4's empty residual (SPEC 1.3): a rejected draft whose ``max(t − d, 0)`` is empty draws from ``t``.

The edges ``empty-residual`` and ``empty-residual-withdrawn`` reach it within §6's sum rule with every draft row at or
above its target row; the answer is a token of ``t``, where an argmax over the all-zero residual gives token 0
(vLLM 0.33.0, docs/bugs.md #64).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")

import reference  # noqa: E402
from devices.registry import load  # noqa: E402
from devices.validate import validate  # noqa: E402
from reference.target import target_probs  # noqa: E402
from specsim.conformance.cases.edges import request_law  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.conformance.run.runner import Context  # noqa: E402
from specsim.judge.compare import reference_step  # noqa: E402
from specsim.mutants.runner import judge_mutant  # noqa: E402
from specsim.mutants.zoo import MUTANTS, make_mutant  # noqa: E402
from specsim.testing.edges import EDGES, make_batch  # noqa: E402
from devices.protocol import Capabilities  # noqa: E402

NAMES = ("empty-residual", "empty-residual-withdrawn")
EDGE = {e.name: e for e in EDGES if e.name in NAMES}


def _emitted(out) -> list:
    return [out.output_token_ids[i, : int(out.num_accepted[i]) + 1].tolist() for i in range(len(out.num_accepted))]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_rejected_row_covers_its_target_row_within_the_sum_rule(name, dtype):
    """The batch is valid (§6: each draft row sums within 1e-3 of 1) and, at each request's rejected position, the
    draft row is at or above the target row everywhere, by 2^-12 where the target is positive (so a target computed
    within §9's 1e-4 leaves the residual empty), and the drafted token has target probability 0."""
    edge = EDGE[name]
    batch, noise = make_batch(edge.requests, dtype=dtype)
    validate(batch, noise)
    t = target_probs(np.asarray(batch.target_logits, np.float64), 1.0)
    cu = np.concatenate([[0], np.cumsum(batch.num_draft_tokens)])
    for i, want in enumerate(edge.expected):
        j = len(want) - 1                      # the rejected position: every edge request rejects its last draft
        row, target = np.asarray(batch.draft_probs[cu[i] + j], np.float64), t[cu[i] + i + j]
        assert not np.any(target - row > 0), (i, row, target)   # max(t − d, 0) is empty
        margin = row[target > 0] - target[target > 0]
        assert np.all(margin >= 2.0 ** -12) or np.all(target[target > 0] == 1.0), (i, margin)
        x = int(edge.requests[i].draft_ids[j])
        assert x == -1 or target[x] == 0


@pytest.mark.parametrize("name", NAMES)
def test_the_answer_is_the_reference_and_a_token_of_the_target(name):
    edge = EDGE[name]
    batch, noise = make_batch(edge.requests)
    assert _emitted(reference_step(batch, noise)) == edge.expected
    assert request_law(edge.requests[0], point=False) == ({(1,): 0.5, (2,): 0.5} if name == "empty-residual"
                                                          else {(2,): 1.0})


def test_token_zero_is_what_an_argmax_of_the_empty_residual_gives_and_the_laws_forbid_it():
    """The edge's requests make token 0 impossible (target probability 0), so a device that races the all-zero row
    and keeps its first id fails at every request, with injected noise and in law."""
    for name in NAMES:
        for r in EDGE[name].requests:
            assert all(seq[-1] != 0 for seq in request_law(r, point=False)), (name, r)


@pytest.mark.parametrize("black_box", [False, True], ids=["injected", "black-box"])
def test_torch_passes_and_the_token_zero_mutant_fails_both_edges(black_box):
    base = load("torch")
    mutant = make_mutant(base, "empty-residual-token-zero")
    wrap = BlackBox if black_box else (lambda d: d)
    ctx = Context(quick=True)
    for name in NAMES:
        (good,) = edge_group(wrap(base), ctx, only=f"L1/edge/{name}")
        (bad,) = edge_group(wrap(mutant), ctx, only=f"L1/edge/{name}")
        assert good.status == "pass", good.detail
        assert bad.status == "fail", bad.detail
        assert not black_box or "probability 0" in bad.detail, bad.detail


def test_the_mutant_passes_every_other_edge_and_l1_injected():
    """Nothing before SPEC 1.3 reached an empty residual: the mutant passes the 1.2 suite's edges and random cases."""
    mutant = make_mutant(load("torch"), "empty-residual-token-zero")
    ctx = Context(quick=True)
    results = edge_group(mutant, ctx)
    older = [r for r in results if not r.name.startswith("L1/edge/empty-residual")
             and spec_versions.introduced_in(r.name) not in ("1.10", "1.14")]
    assert older and all(r.status in ("pass", "not_supported") for r in older), [r.name for r in older
                                                                                 if r.status == "fail"]
    # SPEC 1.10's random fillers at V = 2 and 3 hold one-hot target rows, whose empty residuals it gets wrong too
    # (and 1.14's keyed twins of those batches, the same fillers on the keyed streams)
    assert {r.name for r in results if r.status == "fail" and not r.name.startswith("L1/edge/empty-residual")} == {
        f"L1/edge-neighbours/{edge}/float16/{mode}mixed" for edge in ("u0-zero-target-full", "u-equal-ratio")
        for mode in ("", "keyed/")}
    verdict = judge_mutant(mutant, ctx, groups=("L1-injected", "L1-edges"))
    assert verdict.killed and verdict.killer.name == MUTANTS["empty-residual-token-zero"].killed_by


def test_the_edges_are_new_in_spec_1_3_and_apart_for_a_device_declaring_1_2():
    for name in NAMES:
        assert spec_versions.introduced_in(f"L1/edge/{name}") == "1.3"
    assert spec_versions.introduced_in("L1/edge/withdrawn-draft") == "1.1"
    caps = dataclasses.replace(load("torch").capabilities, spec_version="1.2")
    (result,) = spec_versions.annotate(edge_group(load("torch"), Context(quick=True), only="L1/edge/empty-residual"),
                                       caps)
    assert result.extra["since"] == "1.3" and result.extra["newer_than_declared"]
    assert isinstance(caps, Capabilities) and spec_versions.judged_version(caps) == "1.2"


class PathOf:
    """A device that answers as ``good`` except on the calls ``broken_on(batch, noise)`` picks, where ``broken``
    answers: a kernel variant (the keyed streams', the cut's, §12's, a dtype's) that lost a rule the others keep."""

    def __init__(self, good, broken, broken_on, capabilities=None):
        self.good, self.broken, self.broken_on = good, broken, broken_on
        self.capabilities = capabilities or good.capabilities
        self.name = "path-broken"

    def verify(self, batch, noise=None):
        return (self.broken if self.broken_on(batch, noise) else self.good).verify(batch, noise)


def failed_names(results) -> list[str]:
    """The failed checks' names; every other check passed or was not asked."""
    assert all(r.status in ("pass", "not_supported", "fail") for r in results), [(r.name, r.status) for r in results]
    return sorted(r.name for r in results if r.status == "fail")


def of_version(names, version: str) -> list[str]:
    """The names among ``names`` that SPEC ``version`` has (introduced in it or before it): each version's tests judge
    its own checks, and a later version's tests the checks it added."""
    known = reference.SPEC_VERSIONS
    return sorted(n for n in names if known.index(spec_versions.introduced_in(n)) <= known.index(version))


def dtype_is(name: str):
    """A ``PathOf`` choice: the calls whose logits are of dtype ``name``."""
    return lambda batch, noise: np.asarray(batch.target_logits).dtype.name == name


def _own_draws(batch, noise) -> bool:
    """The calls a device answers on its own randomness: no injected noise."""
    return noise is None


def test_every_edge_runs_on_the_keyed_streams_too_and_a_broken_keyed_path_fails_there_only():
    base = load("torch")
    ctx = Context(quick=True)
    results = edge_group(base, ctx)
    names = {r.name for r in results}
    assert {f"L1/edge/{e.name}/keyed" for e in EDGES} <= names and all(r.status == "pass" for r in results)
    device = PathOf(base, make_mutant(base, "empty-residual-token-zero"), _own_draws)
    (injected,) = edge_group(device, ctx, only="L1/edge/empty-residual")
    (keyed,) = edge_group(device, ctx, only="L1/edge/empty-residual/keyed")
    assert injected.status == "pass" and keyed.status == "fail", (injected.detail, keyed.detail)
    assert spec_versions.introduced_in("L1/edge/vocab-one/keyed") == "1.3"
    assert spec_versions.introduced_in("L1/edge/withdrawn-draft/keyed") == "1.3"
    assert spec_versions.introduced_in("L1/edge/withdrawn-draft") == "1.1"


def test_a_device_with_its_own_unkeyed_draws_runs_each_edge_law_there_too():
    """Injected noise and ``rng = "seeded"``: each edge with its noise, then its law under the device's own draws
    (``/seeded``, in the run's statistical plan); a broken own-randomness path fails there only."""
    base = load("torch")
    seeded = dataclasses.replace(base.capabilities, rng="seeded")
    ctx = Context(quick=True)

    good = edge_group(PathOf(base, base, _own_draws, seeded), ctx)
    assert not [r for r in good if r.name.endswith("/keyed")]
    assert {f"L1/edge/{e.name}/seeded" for e in EDGES} <= {r.name for r in good}
    assert all(r.status in ("pass", "not_supported") for r in good), [r.name for r in good if r.status == "fail"]
    broken = PathOf(base, make_mutant(base, "empty-residual-token-zero"), _own_draws, seeded)
    (injected,) = edge_group(broken, ctx, only="L1/edge/empty-residual")
    (law,) = edge_group(broken, ctx, only="L1/edge/empty-residual/seeded")
    assert injected.status == "pass" and law.status == "fail" and "probability 0" in law.detail, law.detail
    assert spec_versions.introduced_in("L1/edge/vocab-one/seeded") == "1.3"
