"""SPEC 1.14: every §4 and §12 edge at the ladder's sizes and among fillers in every declared dtype, in each noise mode.

1.9 held each edge at batch sizes in every declared dtype holding its logits, in the first noise mode; 1.12 and 1.13
added the device's own randomness (keyed streams, unkeyed draws) in the edges' dtype alone. A kernel variant per
dtype and noise source — the 16-bit variant of the keyed path at large batches keying its streams one position on
(the same law, other tokens) — passed every check. Here it fails the edges' 16-bit keyed twins at 33 requests.
"""

from __future__ import annotations

from devices.registry import load
from specsim.conformance.checks.chain.exact import edge_batch_checks, edge_mixed_checks
from specsim.conformance.checks.sampler.group import edge_batch_checks as sampler_batch_checks
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.runner import Context
from specsim.mutants.zoo import MUTANTS
from tests.quick_runs import zoo_mutant
from tests.test_sampler_twins import SeededToo

QUICK = Context(quick=True)
FULL = Context(quick=False)
MUTANT = "keyed-position-past-32-in-16-bit"
EDGE = "L1/edge/placeholder-full"
SAMPLER = "L1-sampler/edge/min-tokens-crossing/canonical"
SIXTEEN = ("float16", "bfloat16")


def _at_33(monkeypatch):
    from specsim.conformance.cases import declared
    monkeypatch.setattr(declared, "edge_batch_sizes", lambda ctx: (1, 32, 33))
    monkeypatch.setattr(declared, "edge_mixed_sizes", lambda ctx: (33,))
    monkeypatch.setattr(declared, "sampler_mixed_sizes", lambda ctx: (33,))


def _asked(check, device, names, ctx=QUICK) -> dict:
    return {r.name: r for name in names for r in check(device, ctx, only=name)}


def test_every_dtype_twin_is_asked_in_each_noise_mode_and_the_correct_devices_pass(monkeypatch):
    _at_33(monkeypatch)
    torch = load("torch")
    twins = [f"{EDGE}/{d}/keyed/batches" for d in ("float32",) + SIXTEEN]
    assert {n for n in (r.name for r in edge_batch_checks(torch, QUICK)) if n.startswith(f"{EDGE}/")} >= set(twins)
    assert {r.status for r in _asked(edge_batch_checks, torch, twins).values()} == {"pass"}
    seeded = _asked(edge_batch_checks, SeededToo(torch), [f"{EDGE}/bfloat16/seeded/batches"])
    assert [r.status for r in seeded.values()] == ["pass"] and "exact support" in seeded[f"{EDGE}/bfloat16/seeded/batches"].detail
    among = _asked(edge_mixed_checks, torch, [f"{EDGE}/bfloat16/keyed/mixed"])
    assert set(among) == {f"{EDGE}/bfloat16/keyed/mixed", "L1/edge-neighbours/placeholder-full/bfloat16/keyed/mixed"}
    assert {r.status for r in among.values()} == {"pass"}
    sampler = _asked(sampler_batch_checks, torch, [f"{SAMPLER}/{d}/keyed/batches" for d in SIXTEEN], FULL)
    assert len(sampler) == 2 and {r.status for r in sampler.values()} == {"pass"}
    assert _asked(sampler_batch_checks, torch, [f"{SAMPLER}/bfloat16/keyed/batches"]) == {}   # not with --quick


def test_a_16_bit_keyed_path_wrong_past_32_requests_passes_1_13_and_fails_the_16_bit_keyed_twins(monkeypatch):
    """The edges in the first mode in every dtype and on the keyed streams in the edges' dtype pass (so do the
    random keyed 16-bit batches: ``specsim mutants`` names the first killer of a full run); the 16-bit keyed twins
    fail at 33 requests."""
    _at_33(monkeypatch)
    mutant = zoo_mutant(MUTANT)
    dtypes = SIXTEEN + ("float32",)
    forms = ("", "keyed/", *(f"{d}/" for d in dtypes), *(f"{d}/keyed/" for d in dtypes))
    mine = [r for check, area in ((edge_batch_checks, EDGE), (sampler_batch_checks, SAMPLER))
            for r in _asked(check, mutant, [f"{area}/{form}batches" for form in forms], FULL).values()]
    before = [r for r in mine if introduced_in(r.name) != "1.14"]
    assert before and {r.status for r in before} == {"pass"}, [(r.name, r.detail) for r in before if r.status != "pass"]
    failed = {r.name for r in mine if r.status == "fail"}
    assert failed == {f"{area}/{d}/keyed/batches" for area in (EDGE, SAMPLER) for d in SIXTEEN}, failed
    assert all("batch size 33" in r.detail for r in mine if r.status == "fail")
    assert MUTANTS[MUTANT].killed_by == "L1/edge/"


def test_the_twins_are_1_14s_and_the_older_ones_keep_their_versions():
    assert {introduced_in(f"{EDGE}/{d}/{m}/{k}") for d in SIXTEEN for m in ("keyed", "seeded")
            for k in ("batches", "mixed")} == {"1.14"}
    assert introduced_in(f"{SAMPLER}/bfloat16/keyed/mixed") == "1.14"
    assert introduced_in("L1-sampler/edge-neighbours/min-tokens-crossing/canonical/float16/keyed/mixed") == "1.14"
    assert (introduced_in(f"{EDGE}/bfloat16/batches"), introduced_in(f"{EDGE}/keyed/batches"),
            introduced_in(f"{SAMPLER}/keyed/batches"), introduced_in(f"{EDGE}/keyed/mixed-greedy")) == \
        ("1.9", "1.9", "1.12", "1.13")
