"""SPEC 1.4 (and 1.5's twins of it): the empty residual on every path of the target row — through top-k and top-p's cut
(``L1/edge/empty-residual-top-k``, ``-top-p``), on §12's rows (``L1-sampler/edge/empty-residual-allowed-ids``,
``-bad-word``) and in every declared logits dtype (``L1/edge/<edge>/<dtype>``). A device that falls back to ``t``
on its plain float64 rows but races the empty residual on another path (token 0: docs/bugs.md #64) passes 1.3's
checks and fails exactly these."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")

from devices.registry import load  # noqa: E402
from devices.validate import validate  # noqa: E402
from reference.sampler import sampler_rows  # noqa: E402
from specsim.conformance.cases.edges import dtype_twins, edge_dtype  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.checks.sampler.group import edge_check, edge_checks  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.conformance.run.runner import Context  # noqa: E402
from specsim.conformance.stats.plan import edge_tests  # noqa: E402
from specsim.mutants.zoo import make_mutant  # noqa: E402
from specsim.testing.edges import EDGES, make_batch  # noqa: E402
from specsim.testing.embed import tail_ids  # noqa: E402
from specsim.testing.sampler_edges import SAMPLER_EDGES  # noqa: E402
from tests.test_empty_residual import PathOf, dtype_is, failed_names, of_version  # noqa: E402

CUT_EDGES = ("empty-residual-top-k", "empty-residual-top-p")
CUT_EDGES_1_5 = ("empty-residual-top-k-temperature", "empty-residual-top-p-temperature")
SAMPLER_1_4 = ("allowed-ids", "bad-word", "token-mask", "min-tokens")
EMPTY_EDGES = tuple(e.name for e in EDGES if e.name.startswith("empty-residual"))
SAMPLER_EMPTY = tuple(e for e in SAMPLER_EDGES if e.name.startswith("empty-residual"))
CTX = Context(quick=True)


def _rows_cover(batch, target) -> None:
    """At each request's last draft (the one every edge request rejects): the draft row at or above the target row
    everywhere (2^-12 above where the target is below 1), and the drafted token of target probability 0."""
    cu = np.concatenate([[0], np.cumsum(batch.num_draft_tokens)])
    for i in range(batch.batch_size):
        j = int(batch.num_draft_tokens[i]) - 1
        row, t = np.asarray(batch.draft_probs[cu[i] + j], np.float64), target[cu[i] + i + j]
        assert not np.any(t - row > 0), (i, row, t)
        assert np.all(row[t > 0] - t[t > 0] >= 2.0 ** -12) or np.all(t[t > 0] == 1.0), (i, row, t)
        assert t[int(batch.draft_token_ids[cu[i] + j])] == 0


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("name", CUT_EDGES + CUT_EDGES_1_5 + ("empty-residual-temperature",))
def test_the_cut_leaves_the_target_the_draft_row_covers(name, dtype):
    """The batch is valid (§6) and the rejected row covers the target as top-k/top-p leave it; before the cut the
    drafted token has a finite logit, so a fallback to the uncut row can emit it."""
    edge = next(e for e in EDGES if e.name == name)
    batch, noise = make_batch(edge.requests, dtype=dtype)
    validate(batch, noise)
    rows = sampler_rows(np.asarray(batch.target_logits, np.float64), batch.num_draft_tokens, batch.draft_token_ids,
                        batch.temperature, batch.top_k, batch.top_p)
    _rows_cover(batch, rows)
    cu = np.concatenate([[0], np.cumsum(batch.num_draft_tokens)])
    for i in np.flatnonzero((batch.top_k > 0) | (batch.top_p < 1)):   # through a cut: finite before it
        j = int(batch.num_draft_tokens[i]) - 1
        assert np.isfinite(np.asarray(batch.target_logits, np.float64)[cu[i] + i + j, batch.draft_token_ids[cu[i] + j]])


@pytest.mark.parametrize("edge", SAMPLER_EMPTY, ids=[e.name for e in SAMPLER_EMPTY])
def test_the_sampler_rows_leave_the_target_the_draft_row_covers(edge):
    for order in edge.orders:
        batch, noise = edge.batch(order)
        validate(batch, noise)
        rows = sampler_rows(batch.target_logits, batch.num_draft_tokens, batch.draft_token_ids, batch.temperature,
                            batch.top_k, batch.top_p, **batch.sampler.as_kwargs())
        _rows_cover(batch, rows)


def e_1_4(name: str) -> bool:
    """Whether a check name is of one of 1.4's §12 empty-residual edges."""
    return any(f"/empty-residual-{ban}/" in name for ban in SAMPLER_1_4)


def _filtered(batch, noise) -> bool:
    return bool(np.any(batch.top_k > 0) or np.any(batch.top_p < 1))


def _with_sampler(batch, noise) -> bool:
    return batch.sampler is not None and batch.sampler.given()


PATHS = {"cut": _filtered, "float32": dtype_is("float32"), "bfloat16": dtype_is("bfloat16"),
         "float16": dtype_is("float16"), "sampler": _with_sampler}


@pytest.mark.parametrize("path", ["cut", "float32", "bfloat16", "float16"])
def test_a_device_broken_on_one_path_fails_that_paths_edges_only(path):
    """The token-zero recovery on one path alone: 1.3's checks (plain float64 rows) pass, and exactly the new checks
    of that path fail — with injected noise and on the keyed streams for the cut, in the dtype's twin for a dtype."""
    base = load("torch")
    device = PathOf(base, make_mutant(base, "empty-residual-token-zero"), PATHS[path])
    results = edge_group(device, CTX)
    failed = of_version(failed_names(results), "1.5")
    if path == "cut":   # 1.4's cut edges and 1.5's cut edges at T ≠ 1, each with every twin
        want = sorted(f"L1/edge/{n}{twin}" for n in CUT_EDGES + CUT_EDGES_1_5
                      for twin in ("", "/keyed", "/float16", "/bfloat16", "/float32"))
    else:
        want = sorted(f"L1/edge/{n}/{path}" for n in EMPTY_EDGES)
    assert failed == of_version(want, "1.5"), failed
    assert all(spec_versions.introduced_in(n) == ("1.5" if "temperature" in n else "1.4") for n in failed)


def test_a_device_broken_on_its_sampler_path_fails_the_sampler_edges_only():
    base = load("torch")
    device = PathOf(base, make_mutant(base, "empty-residual-token-zero"), _with_sampler)
    results = edge_checks(device, CTX)
    failed = of_version(failed_names(results), "1.5")
    assert failed == of_version((f"L1-sampler/edge/{e.name}/{o}{d}" for e in SAMPLER_EMPTY for o in e.orders
                                  for d in ("", "/float16", "/bfloat16", "/float32")), "1.5"), failed
    assert {spec_versions.introduced_in(n) for n in failed if n.count("/") == 3 and e_1_4(n)} == {"1.4"}
    assert {spec_versions.introduced_in(n) for n in failed if n.count("/") == 4 or not e_1_4(n)} == {"1.5"}
    edge = SAMPLER_EMPTY[0]
    at = (151936, tail_ids(151936, 4))   # as the group restates it at Qwen2's vocabulary
    sized = edge_check(device, edge, "vllm", "float64", "at-size", CTX, at=at)
    assert sized.status == "fail", sized.detail
    assert edge_check(base, edge, "vllm", "float64", "at-size", CTX, at=at).status == "pass"


def test_every_declared_dtype_gets_every_edge_it_holds():
    """1.4's twins (the empty-residual edges) and 1.5's (every other edge whose logits the dtype holds exactly, and
    whose answer does not hinge on a float64 ratio)."""
    caps = load("torch").capabilities
    assert edge_dtype(caps) == "float64"
    for edge in EDGES:
        want = () if edge.name in ("u-just-below-ratio", "top-p-cut-ties") else ("float16", "bfloat16", "float32")
        assert dtype_twins(edge, caps) == want, edge.name
    npu = dataclasses.replace(caps, dtypes=("float32",))
    assert all(dtype_twins(e, npu) == () for e in EDGES)


def test_without_injected_noise_each_dtype_twin_is_a_law_in_the_runs_plan():
    """A black box: each twin is its edge's law under the device's own draws, planned (α from the family) where
    the law has several outcomes; the token-zero recovery on bfloat16 fails its twins by support."""
    base = load("torch")
    box = BlackBox(base)
    planned = {check for _, check, _ in edge_tests(box.capabilities)}
    assert "L1/edge/empty-residual-top-k/bfloat16" in planned and "L1/edge/empty-residual/float16" in planned
    good = edge_group(box, CTX, only="L1/edge/empty-residual-top-k/bfloat16")
    assert [r.status for r in good] == ["pass"], good[0].detail
    broken = BlackBox(PathOf(base, make_mutant(base, "empty-residual-token-zero"), dtype_is("bfloat16")))
    (bad,) = edge_group(broken, CTX, only="L1/edge/empty-residual-top-k/bfloat16")
    assert bad.status == "fail" and "probability 0" in bad.detail, bad.detail


def test_a_device_declaring_1_3_sees_the_new_checks_apart():
    base = load("torch")
    caps = dataclasses.replace(base.capabilities, spec_version="1.3")
    results = spec_versions.annotate(edge_group(base, CTX, only="L1/edge/empty-residual-top-p/bfloat16"), caps)
    assert results[0].extra["since"] == "1.4" and results[0].extra["newer_than_declared"]
    assert spec_versions.introduced_in("L1/edge/empty-residual/keyed") == "1.3"
    assert spec_versions.introduced_in("L1-sampler/edge/empty-residual-bad-word/canonical/V65537") == "1.4"
    assert spec_versions.introduced_in("L1-sampler/edge/bad-word-completed-by-drafts/vllm") == "1.1"
