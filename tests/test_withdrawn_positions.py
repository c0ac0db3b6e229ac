"""SPEC §4's withdrawn drafts at every position of a chain: each residual read from the withdrawn draft's own row.

The edge ``withdrawn-every-position`` withdraws first (and again later), in the middle, last and twice in a row;
every draft row leaves a different token as its residual, so the row a device read is visible in what it emits,
with injected noise and as an exact law without it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")

from devices.registry import load  # noqa: E402
from specsim.conformance.cases.edges import request_law  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.conformance.run.runner import Context  # noqa: E402
from specsim.judge.compare import reference_step  # noqa: E402
from specsim.mutants.runner import judge_mutant  # noqa: E402
from specsim.mutants.zoo import MUTANTS, make_mutant  # noqa: E402
from specsim.testing.edges import EDGES, make_batch  # noqa: E402

NAME = "withdrawn-every-position"
CHECK = f"L1/edge/{NAME}"
EDGE = next(e for e in EDGES if e.name == NAME)


def _emitted(out) -> list:
    return [out.output_token_ids[i, : int(out.num_accepted[i]) + 1].tolist() for i in range(len(out.num_accepted))]


def _with_rows(batch, rows: np.ndarray):
    return dataclasses.replace(batch, draft_probs=np.asarray(batch.draft_probs)[rows])


def test_the_edge_withdraws_first_middle_last_and_twice():
    """K = 3 chains; a withdrawal at each position, one request withdrawing twice apart and one twice in a row."""
    where = [[j for j, w in enumerate(r.withdrawn) if w] for r in EDGE.requests]
    assert all(len(r.draft_ids) == 3 for r in EDGE.requests)
    assert {w[0] for w in where} == {0, 1, 2} and [0, 2] in where and [1, 2] in where


def test_the_answer_is_the_reference_and_the_one_sequence_of_each_law():
    batch, noise = make_batch(EDGE.requests)
    assert _emitted(reference_step(batch, noise)) == EDGE.expected
    for r, want in zip(EDGE.requests, EDGE.expected):
        assert request_law(r, point=False) == {tuple(want): 1.0}


@pytest.mark.parametrize("rows", ["padding", "previous", "next", "cursor-not-advanced"])
def test_a_withdrawn_residual_from_any_other_row_emits_another_token(rows):
    """Read as padding, from the row before or after, or through a cursor that skips withdrawn rows: each
    changes what some request emits (the exact laws give those sequences probability 0)."""
    batch, noise = make_batch(EDGE.requests)
    w = np.asarray(batch.withdrawn, dtype=np.int64)
    r = np.arange(len(w))
    wrong = {"padding": dataclasses.replace(batch, withdrawn=None),
             "previous": _with_rows(batch, np.maximum(r - 1, 0)),
             "next": _with_rows(batch, np.minimum(r + 1, len(w) - 1)),
             "cursor-not-advanced": _with_rows(batch, r - (np.cumsum(w) - w))}[rows]
    emitted = _emitted(reference_step(wrong, noise))
    laws = [request_law(q, point=False) for q in EDGE.requests]
    assert any(tuple(e) not in law for e, law in zip(emitted, laws)), emitted


@pytest.mark.parametrize("black_box", [False, True], ids=["injected", "black-box"])
def test_torch_passes_and_the_row_cursor_mutant_fails_the_edge(black_box):
    base = load("torch")
    mutant = make_mutant(base, "withdrawn-row-not-advanced")
    wrap = BlackBox if black_box else (lambda d: d)
    ctx = Context(quick=True)
    (good,) = edge_group(wrap(base), ctx, only=CHECK)
    (bad,) = edge_group(wrap(mutant), ctx, only=CHECK)
    assert good.status == "pass", good.detail
    assert bad.status == "fail", bad.detail
    assert not black_box or "probability 0" in bad.detail, bad.detail


def test_the_row_cursor_mutant_passes_the_older_withdrawn_edge_in_black_box():
    """What the new edge adds: the older edge withdraws only a request's last draft after one withdrawn alone,
    where a row read one early is the same row of the same law."""
    (old,) = edge_group(BlackBox(make_mutant(load("torch"), "withdrawn-row-not-advanced")), Context(quick=True),
                        only="L1/edge/withdrawn-draft")
    assert old.status == "pass", old.detail


def test_the_mutant_is_killed_by_its_named_check_and_in_black_box_by_the_edge():
    mutant = make_mutant(load("torch"), "withdrawn-row-not-advanced")
    ctx = Context(quick=True)
    injected = judge_mutant(mutant, ctx, groups=("L1-injected",))
    assert injected.killed and injected.killer.name.startswith(MUTANTS["withdrawn-row-not-advanced"].killed_by)
    black = judge_mutant(mutant, ctx, black_box=True, groups=("L1-injected", "L1-keyed", "L1-edges"))
    assert black.killed and black.killer.name == CHECK, black.killer


def test_the_seed_table_runs_the_edge_for_the_black_box_twin():
    """The injected killer's group (L1-injected) has stand-ins that never run L1-edges: the mutant names its twin's."""
    from specsim.mutants import seedtable as st
    mutant = MUTANTS["withdrawn-row-not-advanced"]
    assert st.killing_groups(st.named_check(mutant, False), False) == ("L1-injected",)
    assert st.killing_groups(st.named_check(mutant, True), True) == ("L1-edges", "L3-statistical")
    assert st.named_check(MUTANTS["row-offset"], True) == MUTANTS["row-offset"].killed_by


def test_the_edge_is_new_in_spec_1_2():
    assert spec_versions.introduced_in(CHECK) == "1.2"
    assert spec_versions.introduced_in("L1/edge/withdrawn-draft") == "1.1"
