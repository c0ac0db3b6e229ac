"""SPEC §12.2's bad words at every split of their prefix between the output before the step and the drafts.

Row j's output so far is the output before the step followed by drafts ``0 .. j−1``, matched as one sequence.
The edge ``bad-word-at-every-split`` puts a word's prefix wholly in the output, across the boundary (one output
token and one draft, two and one, one and two) and wholly in the drafts; a matcher that never crosses the boundary,
or reads the drafts one position early, accepts a banned draft.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from devices.torch_device import make_cpu_device  # noqa: E402
from specsim.conformance.cases.edges import sampler_edge_laws  # noqa: E402
from specsim.conformance.checks.sampler.group import edge_check, edge_checks, edge_law_check  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.conformance.run.runner import Context  # noqa: E402
from specsim.conformance.stats.plan import run_plan  # noqa: E402
from specsim.mutants.zoo import MUTANTS  # noqa: E402
from specsim.testing.sampler_edges import SAMPLER_EDGES  # noqa: E402

EDGE = next(e for e in SAMPLER_EDGES if e.name == "bad-word-at-every-split")
NEW = ("sampler-bad-words-never-across", "sampler-bad-words-draft-offset")


def _split(output: list, word: list, row: int) -> tuple[int, int]:
    """(tokens of the word's prefix in the output, in the drafts) where row ``row`` completes it."""
    prefix = len(word) - 1
    in_drafts = min(prefix, row)
    return prefix - in_drafts, in_drafts


def test_the_prefixes_lie_in_the_output_across_the_boundary_and_in_the_drafts():
    """Each request bans at its last draft; the splits cover (n, 0), (1, 1), (2, 1), (1, 2) and (0, n)."""
    batch, _ = EDGE.batch("canonical")
    splits, lengths = set(), set()
    for r, output, (word,) in zip(EDGE.requests, batch.sampler.output_token_ids, batch.sampler.bad_words):
        row = len(r.draft_ids) - 1
        history = list(output) + list(r.draft_ids[:row])
        assert history[len(history) - (len(word) - 1):] == list(word[:-1]) and r.draft_ids[row] == word[-1]
        splits.add(_split(list(output), list(word), row))
        lengths.add(len(word))
    assert {(1, 0), (2, 0), (1, 1), (2, 1), (1, 2), (0, 1), (0, 2)} <= splits and {2, 3, 4} <= lengths


def test_every_request_law_is_one_sequence():
    for order in EDGE.orders:
        laws = sampler_edge_laws(EDGE, order)
        assert [list(law) for law in laws] == [[tuple(e)] for e in EDGE.expected_in(order)]


def test_the_edge_is_new_in_spec_1_2():
    for name in ("L1-sampler/edge/bad-word-at-every-split/vllm", "L1-sampler/edge/bad-word-at-every-split/canonical/V65537"):
        assert spec_versions.introduced_in(name) == "1.2"
    assert spec_versions.introduced_in("L1-sampler/edge/bad-word-completed-by-drafts/vllm") == "1.1"


@pytest.mark.parametrize("mutant_id", NEW)
def test_each_mutant_fails_the_edge_with_injected_noise_and_in_black_box(mutant_id):
    """Seed 3, both orders: the edge fails both ways (in black box by its exact support), the device passes."""
    ctx = Context(seed=3, quick=True)
    broken, correct = MUTANTS[mutant_id].make(), make_cpu_device()
    plan = run_plan(BlackBox(correct).capabilities, ctx)
    for order in EDGE.orders:
        name = f"L1-sampler/edge/{EDGE.name}/{order}"
        assert edge_check(correct, EDGE, order, "float64", name, ctx).status == "pass"
        assert edge_check(broken, EDGE, order, "float64", name, ctx).status == "fail"
        assert edge_law_check(BlackBox(correct), EDGE, order, "float64", name, ctx, plan).status == "pass"
        result = edge_law_check(BlackBox(broken), EDGE, order, "float64", name, ctx, plan)
        assert result.status == "fail" and "which the exact law gives probability 0" in result.detail, result.detail


def test_the_never_across_mutant_passes_every_other_edge_and_is_named_by_this_one():
    """What the edge adds: a matcher run on the output and on the drafts apart meets every other §12 edge right."""
    mutant = MUTANTS["sampler-bad-words-never-across"]
    failing = [r.name for r in edge_checks(mutant.make(), Context(seed=0, quick=True)) if r.status != "pass"]
    assert failing and all(n.startswith(f"L1-sampler/edge/{EDGE.name}/") for n in failing), failing
    assert failing[0].startswith(mutant.killed_by)
