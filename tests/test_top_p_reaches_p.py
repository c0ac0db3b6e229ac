"""SPEC 1.8: top-p keeps the smallest set whose mass reaches p where the classes are nearly equal
(``L1/edge/top-p-reaches-p``): a cut that stops short of p, as an approximate pivot search can, and one that runs past
it each fail the edge, token for token and by its law, and keep every check of SPEC 1.7's edges."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from devices.registry import load  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.mutants.zoo import SOURCE_MUTANTS  # noqa: E402
from tests.test_empty_residual import failed_names, of_version  # noqa: E402
from tests.test_empty_residual_params import CTX  # noqa: E402

EDGE = "L1/edge/top-p-reaches-p"
DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")
SHORT, PAST = (next(m for m in SOURCE_MUTANTS if m.id == i) for i in ("top-p-short-of-p", "top-p-past-p"))
"""The zoo's approximate top-p cuts (``specsim.mutants.zoo``): a pivot search that settles within 10%."""


def test_the_torch_device_passes_the_edge_in_every_form():
    results = [r for r in edge_group(load("torch"), CTX) if r.name.startswith(EDGE)]
    assert {r.status for r in results} == {"pass"} and len(results) == 29, [(r.name, r.status) for r in results]
    assert {spec_versions.introduced_in(r.name) for r in results
            if not r.name.endswith(("/batches", "/mixed")) and "/mixed-" not in r.name} == {"1.8"}
    keyed_dtypes = [r.name for r in results if "/keyed/" in r.name and r.name.split("/")[3] in DTYPE_NAMES]
    assert len(keyed_dtypes) == 6 and {spec_versions.introduced_in(n) for n in keyed_dtypes} == {"1.14"}
    assert {spec_versions.introduced_in(r.name) for r in results
            if r.name.endswith("/batches") and r.name not in keyed_dtypes} == {"1.9"}
    assert {spec_versions.introduced_in(r.name) for r in results
            if r.name.endswith("/mixed") and r.name not in keyed_dtypes} == {"1.10"}
    assert {spec_versions.introduced_in(r.name) for r in results if "/keyed/mixed-" in r.name} == {"1.13"}
    assert {spec_versions.introduced_in(r.name) for r in results
            if "/mixed-" in r.name and "/keyed/" not in r.name} == {"1.11"}   # 4 kinds


@pytest.mark.parametrize("mutant", [SHORT, PAST], ids=lambda m: m.id)
def test_a_cut_short_of_or_past_p_fails_the_edge_and_no_earlier_edge(mutant):
    failed = failed_names(edge_group(mutant.make(), CTX))
    # no other edge; SPEC 1.10's random fillers with top-p 0.8 and 0.95 beside other edges may meet the cut too
    assert failed and all(n.startswith((EDGE, "L1/edge-neighbours/")) for n in failed), failed
    assert EDGE in failed and not of_version(failed, "1.7")


@pytest.mark.parametrize("mutant", [SHORT, PAST], ids=lambda m: m.id)
def test_without_injected_noise_the_cut_is_held_by_its_law(mutant):
    (good,) = edge_group(BlackBox(load("torch")), CTX, only=EDGE)
    assert good.status == "pass", good.detail
    (bad,) = edge_group(BlackBox(mutant.make()), CTX, only=EDGE)
    assert bad.status == "fail" and bad.layer in ("L1", "L3"), bad.detail   # its support, or its law
    assert bad.layer == "L1" or bad.p_value < bad.alpha, bad.detail
