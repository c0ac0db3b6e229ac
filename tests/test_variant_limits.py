"""SPEC 1.15: every declared kernel variant at every declared limit, in every noise mode the device declares.

1.14 asked each variant once, at 33 requests and V = 257; the declared limits were held in one variant per mode. A
device whose 16-bit greedy emission reads one tile of 2^17 ids, or whose 16-bit variant accepts every draft past 128,
passes every 1.14 check (every group at full size; the closing note of the change records the run) and fails
exactly its variants' limit checks here. The checks run at the declared values themselves, so the devices below
declare small ones where the bug allows (the checks' cost grows with V).
"""

from __future__ import annotations

import dataclasses

import pytest

from devices.registry import load
from specsim.conformance.checks.declared.group import declared_exact_group, variant_checks
from specsim.conformance.checks.declared.variants import variant_limit_checks
from specsim.conformance.core import scope
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.runner import Context
from specsim.conformance.verdict.profiles import unreached, verdict
from tests.fixtures.tree_vendor_devices import SeededTreeDevice
from tests.fixtures.variant_limit_devices import ACCEPTS_PAST_128_IN_16_BIT, GREEDY_FIRST_TILE_16_BIT

FULL, QUICK = Context(), Context(quick=True)


class Declaring:
    """``inner`` under another declaration (its code unchanged): the limits a check asks at are the declared ones."""

    def __init__(self, inner, **changes):
        self.inner, self.name = inner, f"{inner.name} (declaring {sorted(changes)})"
        self.capabilities = dataclasses.replace(inner.capabilities, **changes)

    def verify(self, batch, noise=None):
        return self.inner.verify(batch, noise)

    def verify_tree(self, batch, noise=None):
        return self.inner.verify_tree(batch, noise)


SMALL = dict(max_vocab_size=4099, max_k=20, max_tree_nodes=24)
"""Limits past a tile of 4096 and a warp of drafts, cheap enough to ask every variant at."""


def _failing(results) -> set[str]:
    return {r.name for r in results if r.status != "pass"}


def test_the_torch_device_reaches_every_declared_limit_in_every_variant_and_mode():
    device = Declaring(load("torch"), **SMALL, dtypes=("float32", "bfloat16"))
    scope.clear()
    for mode in ("injected", "keyed"):
        results = variant_limit_checks(device, FULL, mode)
        variants = scope.declared_variants(device.capabilities, mode)
        assert len(results) == 3 * len(variants) and not _failing(results), \
            [(r.name, r.detail) for r in results if r.status != "pass"][:3]
        assert {r.name.rsplit("/", 1)[1] for r in results} == {"V4099", "K20", "B1025", "N24-D20"}
    checked = scope.snapshot()
    assert unreached(checked, device.capabilities) == {"injected": {}, "keyed": {}}
    assert variant_limit_checks(device, QUICK, "keyed") == []   # not with --quick: a quick run asks 1.14's one call


def test_a_device_drawing_its_own_unkeyed_noise_is_asked_every_variant_by_its_exact_support():
    device = SeededTreeDevice(Declaring(load("torch"), **SMALL, dtypes=("float32", "bfloat16")))
    scope.clear()
    results = variant_limit_checks(device, FULL, "device-rng")
    assert results and not _failing(results), [(r.name, r.detail) for r in results if r.status != "pass"][:3]
    assert all(r.name.startswith("L3/declared/support/variant-limit/") and r.layer == "L3" for r in results)
    checked = scope.snapshot()
    assert scope.unasked(checked, device.capabilities) == {"device-rng": []}   # 1.14 left these unasked
    assert unreached(checked, device.capabilities) == {"device-rng": {}}


@pytest.mark.parametrize("mutant, limits, kinds, size", [
    (GREEDY_FIRST_TILE_16_BIT, dict(max_vocab_size=262144, max_k=8, top_k=False, top_p=False), ("greedy",), "V262144"),
    (ACCEPTS_PAST_128_IN_16_BIT, dict(max_vocab_size=300, max_k=130), ("sampled", "greedy", "filtered"), "K130"),
], ids=lambda x: getattr(x, "id", None))
def test_a_16_bit_variant_wrong_past_a_size_fails_its_limit_checks_and_nothing_1_14_asks(mutant, limits, kinds, size):
    device = Declaring(mutant.make(), **limits, dtypes=("float32", "bfloat16"), tree_schemes=(), sampler=())
    for mode in ("injected", "keyed"):
        assert not _failing(variant_checks(device, FULL, mode))   # 1.14's one call per variant
        got = _failing(variant_limit_checks(device, FULL, mode))
        assert got == {f"L1/declared/{mode}/variant-limit/bfloat16/{k}/{f}/{size}" for k in kinds
                       for f in ("draft", "point")}, sorted(got)
    # the declared limits themselves, held in float32 (1.5–1.8), pass: the bug is the 16-bit variant's alone
    earlier = [r for r in declared_exact_group(device, QUICK) if introduced_in(r.name) != "1.15"]
    assert earlier and not _failing(earlier)


def test_the_same_bug_under_the_devices_own_unkeyed_draws_lands_outside_the_support():
    device = SeededTreeDevice(Declaring(GREEDY_FIRST_TILE_16_BIT.make(), max_vocab_size=262144, max_k=8,
                                        dtypes=("bfloat16",), tree_schemes=(), sampler=(), top_k=False, top_p=False))
    got = _failing(variant_limit_checks(device, FULL, "device-rng"))
    assert got == {f"L3/declared/support/variant-limit/bfloat16/greedy/{f}/V262144" for f in ("draft", "point")}


def test_a_run_short_of_a_limit_says_so_and_is_no_pass_from_1_15():
    from specsim.conformance.cases.declared import variant_limits
    caps = dataclasses.replace(load("torch").capabilities, **SMALL, dtypes=("float32",))
    full = {m: {"variants": scope.declared_variants(caps, m),
                "reach": {v: variant_limits(caps, v) for v in scope.declared_variants(caps, m)}}
            for m in ("injected", "keyed")}
    assert unreached(full, caps) == {"injected": {}, "keyed": {}}
    short = {m: dict(e, reach=dict(e["reach"], **{"float32 greedy draft": {"V": 257, "K": 20, "batch": 1025}}))
             for m, e in full.items()}
    assert unreached(short, caps)["keyed"] == {"float32 greedy draft": {"V": [257, 4099]}}
    for declared in ("1.15", "1.14"):
        v = verdict(dataclasses.replace(caps, spec_version=declared), [], ["L1-declared"], scope={"checked": short})
        said = [r for r in v["reasons"] if "not asked at every declared limit" in r]
        assert len(said) == (2 if declared == "1.15" else 0), v["reasons"]   # one reason a mode; 1.14 never said it
        assert v["scope"]["unreached"]["keyed"] == {"float32 greedy draft": {"V": [257, 4099]}}
    assert introduced_in("L1/declared/keyed/variant-limit/float16/greedy/draft/V262144") == "1.15"
    assert introduced_in("L3/declared/support/variant-limit/float32/tree/point/B1025") == "1.15"
    assert introduced_in("L1/declared/keyed/variant/float16/greedy/draft") == "1.14"
