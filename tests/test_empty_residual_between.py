"""SPEC 1.8: the empty residual's fallback between SPEC 1.7's positions
(``L1/declared/<mode>/empty-residual-between-K<K>`` and its support twin): every position of the declared ``max_k``
below 512 that 1.7's ladder leaves out, and past 512 each side of every multiple of 64.

Each test device below keeps SPEC 1.7's every positions check and loses the fallback where only 1.8 looks: at
position 100 of the torch device's declared 256, or in the tile of positions 576 to 639 of a declared 1024."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")

from devices.registry import load  # noqa: E402
from specsim.conformance.cases.declared import (DENSE_POSITIONS, POSITION_TILE, Limit,  # noqa: E402
                                                between_positions, empty_positions, k_limits)
from specsim.conformance.checks.declared.group import (POSITION_SETS, declared_exact_group,  # noqa: E402
                                                       empty_residual_positions, support_checks)
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from tests.test_empty_residual_params import CTX, fallback_lost_at  # noqa: E402

MODES = ("injected", "keyed")


AT_100 = fallback_lost_at("fallback-lost-at-100", "position 100", "num_accepted == 100", "SPEC 1.8")
TILE_576 = fallback_lost_at("fallback-lost-in-a-tile", "positions 576 to 639",
                            "(num_accepted >= 576) & (num_accepted < 640)", "SPEC 1.8")


def _declaring_max_k(device, max_k: int):
    """``device`` (a torch device, or a mutant built from one) declaring ``max_k``."""
    for d in (device, getattr(device, "inner", device)):
        d.capabilities = dataclasses.replace(d.capabilities, max_k=max_k)
    return device


def _checks(device, kind: str, lim: Limit) -> list:
    return [empty_residual_positions(device, CTX, mode, lim, "float32", kind) for mode in MODES]


def test_between_and_1_7_positions_together_reach_every_position_below_512_and_every_tiles_edges():
    for K in (8, 66, 67, 100, 256, 512, 513, 1024, 4096):
        old, new = set(empty_positions(K)), set(between_positions(K))
        assert not old & new, K
        both = old | new
        assert set(range(min(K, DENSE_POSITIONS))) <= both, K
        edges = {p + d for p in range(DENSE_POSITIONS, K + 1, POSITION_TILE) for d in (-1, 0, 1) if p + d < K}
        assert edges <= both and K - 1 in both and max(both) == K - 1, K
    assert between_positions(66) == () and between_positions(67) == ()
    assert 100 in between_positions(256) and 100 not in empty_positions(256)
    assert {576, 639, 640} <= set(between_positions(1024)) and 600 not in between_positions(1024)


def test_the_torch_device_passes_the_new_checks_and_makes_none_where_1_7_reaches_every_position():
    device = load("torch")
    assert [lim.value for lim in k_limits(device.capabilities)] == [8, 256]
    results = _checks(device, "between", Limit(256, 256))
    assert [r.status for r in results] == ["pass", "pass"], [r.detail for r in results]
    assert "186 requests agree (an empty residual at positions 66-126, 130-254 of K=256" in results[0].detail
    names = [r.name for r in declared_exact_group(device, CTX) if "empty-residual-between" in r.name]
    assert names == [f"L1/declared/{m}/empty-residual-between-K256" for m in MODES]   # none at K = 8
    assert POSITION_SETS["between"](8) == ()


def test_a_fallback_lost_only_at_position_100_passes_1_7_and_fails_1_8():
    device = AT_100.make()
    for lim in k_limits(device.capabilities):
        assert {r.status for r in _checks(device, "positions", lim)} == {"pass"}, lim
    failed = _checks(device, "between", Limit(256, 256))
    assert [r.status for r in failed] == ["fail", "fail"], [r.detail for r in failed]
    assert {spec_versions.introduced_in(r.name) for r in failed} == {"1.8"}


def test_without_injected_noise_position_100_is_held_by_its_support():
    good = [r for r in support_checks(BlackBox(load("torch")), CTX) if "between" in r.name]
    assert [(r.name, r.status) for r in good] == [("L3/declared/support/empty-residual-between-K256", "pass")], good
    results = [r for r in support_checks(BlackBox(AT_100.make()), CTX) if "empty-residual-" in r.name]
    status = {r.name.rsplit("/", 1)[-1]: r.status for r in results}
    assert status == {"empty-residual-positions-K8": "pass", "empty-residual-positions-K256": "pass",
                      "empty-residual-between-K256": "fail"}, status
    (bad,) = [r for r in results if r.status == "fail"]
    assert "the request rejecting at position 100" in bad.detail, bad.detail


def test_a_fallback_lost_in_a_tile_past_512_fails_at_the_tiles_edges():
    """A device declaring ``max_k`` 1024 whose fallback is lost at positions 576 to 639 (a tile of 64 that no power
    of two borders) passes 1.7's positions and fails 1.8's, where 576 and 639 are checked."""
    device = _declaring_max_k(TILE_576.make(), 1024)
    lim = Limit(1024, 1024)
    assert empty_residual_positions(device, CTX, "injected", lim, "float32").status == "pass"
    bad = empty_residual_positions(device, CTX, "injected", lim, "float32", "between")
    assert bad.status == "fail", bad.detail
    good = empty_residual_positions(_declaring_max_k(load("torch"), 1024), CTX, "injected", lim, "float32", "between")
    assert good.status == "pass", good.detail


def test_a_device_declaring_1_7_sees_the_new_checks_apart():
    device = load("torch")
    device.capabilities = dataclasses.replace(device.capabilities, spec_version="1.7")
    results = spec_versions.annotate(_checks(AT_100.make(), "between", Limit(256, 256)), device.capabilities)
    assert all(r.extra["since"] == "1.8" and r.extra["newer_than_declared"] for r in results)
    assert spec_versions.introduced_in("L3/declared/support/empty-residual-between-K256") == "1.8"
    assert spec_versions.introduced_in("L1/declared/keyed/empty-residual-positions-K256") == "1.7"


def test_a_failing_positions_check_is_replayed_alone():
    """``specsim replay`` offers the declared positions checks (one call of small rows each): ``one_check`` runs
    the failing one alone and fails it the same way."""
    from specsim.conformance.run.one_check import one_check, replay_command
    name = "L1/declared/injected/empty-residual-between-K256"
    assert replay_command("torch", 0, name) == f"specsim replay --device torch --seed 0 {name}"
    assert replay_command("torch", 0, "L1/declared/injected/K256") is None
    alone = one_check(AT_100.make(), CTX, name)
    assert alone.status == "fail" and alone.detail == _checks(AT_100.make(), "between", Limit(256, 256))[0].detail
    with pytest.raises(ValueError, match="no L1 check"):
        one_check(load("torch"), CTX, "L1/declared/injected/empty-residual-between-K8")
