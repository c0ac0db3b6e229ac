"""SPEC 1.14: every kernel variant the device declares asked once in each token-for-token noise mode, and a verdict
that names the declared variants no check asked.

A device compiles (or dispatches) a variant per dtype, noise source and path. Before 1.14 no check asked some of the
torch device's declared ones — 16-bit trees on the keyed streams, 16-bit §12 batches with point proposals, greedy
batches with draft rows in 16 bits — and the compiled Triton device's 16-bit §12 race on its own noise did not compile
until the first check that asked for it. ``L1/declared/<mode>/variant/<dtype>/<kind>/<form>`` asks each one.
"""

from __future__ import annotations

import dataclasses

from devices.protocol import Capabilities
from devices.registry import load
from specsim.conformance.checks.declared.group import variant_checks
from specsim.conformance.checks.trees import l1, l2
from specsim.conformance.core import scope
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.runner import Context
from specsim.mutants.zoo import MUTANTS
from tests.quick_runs import zoo_mutant

QUICK = Context(quick=True)
MUTANT = "tree-keyed-position-in-16-bit"


def test_the_declared_variants_follow_the_declaration():
    torch = load("torch").capabilities
    assert len(scope.declared_variants(torch, "injected")) == len(torch.dtypes) * 5 * 2
    assert scope.declared_variants(torch, "device-rng") == []   # the torch device's own draws are keyed
    point_only = Capabilities(injected_noise=False, rng="seeded", max_vocab_size=8, draft_probs=False,
                              point_proposals=True, greedy=False, top_k=False, top_p=False, dtypes=("float32",),
                              tree_schemes=("sglang",))
    assert scope.declared_variants(point_only, "device-rng") == ["float32 sampled point", "float32 tree point"]
    assert scope.declared_modes(point_only) == ["device-rng"]


def test_the_torch_device_passes_every_variant_in_both_modes():
    device = load("torch")
    for mode in ("injected", "keyed"):
        results = variant_checks(device, QUICK, mode)
        assert [r.name.split("/variant/")[1].replace("/", " ") for r in results] == \
            scope.declared_variants(device.capabilities, mode)
        assert {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results if r.status != "pass"]


def test_a_16_bit_keyed_tree_path_keyed_one_position_on_passes_1_13_and_fails_the_16_bit_keyed_tree_variants():
    """Every tree check 1.13 asks passes (no random keyed tree, pattern or edge is sent in 16 bits on the keyed
    streams; L1-16bit's trees take injected noise); the 16-bit keyed tree variants fail."""
    mutant = zoo_mutant(MUTANT)
    before = [r for r in l1.tree_l1_group(mutant, QUICK) + l2.tree_l2_group(mutant, QUICK)
              if introduced_in(r.name) != "1.14"]
    assert before and {r.status for r in before} == {"pass"}, [(r.name, r.detail) for r in before if r.status != "pass"]
    failed = {r.name for r in variant_checks(mutant, QUICK, "keyed") if r.status == "fail"}
    assert failed == {f"L1/declared/keyed/variant/{d}/tree/{f}" for d in ("float16", "bfloat16")
                      for f in ("draft", "point")}, failed
    assert {r.status for r in variant_checks(mutant, QUICK, "injected")} == {"pass"}
    assert MUTANTS[MUTANT].killed_by == "L1/declared/keyed/variant/"
    assert introduced_in("L1/declared/keyed/variant/float16/tree/point") == "1.14"


def test_a_verdict_names_the_declared_variants_no_check_asked():
    caps = dataclasses.replace(load("torch").capabilities, dtypes=("float32", "bfloat16"))
    asked = {"injected": {"variants": scope.declared_variants(caps, "injected")[1:]}}
    missing = scope.unasked(asked, caps)
    assert missing["injected"] == scope.declared_variants(caps, "injected")[:1]
    assert missing["keyed"] == scope.declared_variants(caps, "keyed")   # no keyed call at all
