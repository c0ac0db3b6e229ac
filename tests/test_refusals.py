"""SPEC §10: a device refuses (``UnsupportedCall``) only what it does not declare.

Vendor-like devices built on the torch device: one declares ``max_vocab_size=262144`` but refuses
V > 300, one declares nothing about batch size (nothing can be declared) but refuses batches over 32,
one refuses trees of more than 8 requests. Every group that asks them such a call fails it, naming
the declaration the refusal contradicts; the torch device itself passes the same groups; a call
outside the declaration stays ``not_supported``.
"""

from __future__ import annotations

import numpy as np
import pytest

from devices.protocol import Capabilities, UnsupportedCall, VerifyBatch
from specsim.conformance.core.calls import Refusal, ask, call, refused
from specsim.conformance.run.runner import Context, run_conformance, run_group, verdict_of

torch_device = pytest.importorskip("devices.torch_device")

QUICK = Context(seed=0, quick=True)


class VocabRefuser(torch_device.TorchDevice):
    """Declares the torch device's ``max_vocab_size=262144``, serves V <= 300 only."""

    def __init__(self):
        super().__init__(name="vocab-refuser")

    def verify(self, batch, noise=None):
        if batch.vocab_size > 300:
            raise UnsupportedCall("V <= 300", batch.vocab_size)
        return super().verify(batch, noise)


class BatchRefuser(torch_device.TorchDevice):
    """Serves batches of at most 32 requests; batch size is no declared limit, so it declares nothing of it."""

    def __init__(self):
        super().__init__(name="batch-refuser")

    def verify(self, batch, noise=None):
        if batch.batch_size > 32:
            raise UnsupportedCall("batch <= 32", batch.batch_size)
        return super().verify(batch, noise)


class TreeBatchRefuser(torch_device.TorchDevice):
    """Chains served whole; trees of more than 8 requests refused."""

    def __init__(self):
        super().__init__(name="tree-batch-refuser")

    def verify_tree(self, batch, noise=None):
        if batch.batch_size > 8:
            raise UnsupportedCall("tree batch <= 8", batch.batch_size)
        return super().verify_tree(batch, noise)


def _by_name(results):
    return {r.name: r for r in results}


def test_vocabulary_refusal_inside_the_declaration_fails_naming_max_vocab_size():
    results = _by_name(run_group("L1-sizes", VocabRefuser(), QUICK))
    check = results["L1/sizes/vocab-V32000"]
    assert check.status == "fail", check.detail
    assert check.detail.startswith("device refused a call inside its declaration (max_vocab_size=262144, V=32000;")
    assert "UnsupportedCall: V <= 300 (got 32000)" in check.detail
    assert results["L1/sizes/vocab-V127"].status == "pass"


def test_vocabulary_refusal_fails_the_statistical_case_instead_of_skipping_it():
    from specsim.conformance.checks.chain.statistical import statistical_group
    results = statistical_group(VocabRefuser(), QUICK, cases={"v1024-topk", "v256-near"})
    assert all(r.status == "pass" for r in results if r.name.startswith("L3/v256-near/"))
    results = [r for r in results if r.name.startswith("L3/v1024-topk/")]
    assert results and all(r.status == "fail" for r in results)
    assert "max_vocab_size=262144, V=1024" in results[0].detail


@pytest.mark.parametrize("group, name", [("L1-sizes", "L1/sizes/batch-B33"), ("L2-sizes", "L2/sizes/determinism"),
                                         ("L1-volume", "L1/volume"), ("L3-statistical", "L3/v8-hetero/r0/pos0")])
def test_batch_size_refusal_fails_every_group_that_asks_a_larger_batch(group, name):
    check = _by_name(run_group(group, BatchRefuser(), QUICK))[name]
    assert check.status == "fail", check.detail
    assert "device refused a call inside its declaration (B=" in check.detail
    assert "batch size is never a declared limit" in check.detail and "batch <= 32 (got" in check.detail


def test_tree_batch_refusal_fails_the_tree_statistics():
    results = run_group("L3-trees", TreeBatchRefuser(), QUICK)
    failed = [r for r in results if r.status == "fail"]
    assert failed and all(r.name.startswith("L3/trees/") for r in failed)
    detail = failed[0].detail
    assert detail.startswith("device refused a call inside its declaration (tree_schemes=greedy/rrs/sglang, needs ")
    assert "batch size is never a declared limit" in detail and "tree batch <= 8 (got" in detail


@pytest.mark.parametrize("group", ["L1-sizes", "L2-sizes", "L1-volume", "L3-trees"])
def test_the_torch_device_passes_the_groups_the_refusers_fail(group):
    bad = [f"{r.name}: {r.detail[:200]}" for r in run_group(group, torch_device.TorchDevice(), QUICK)
           if r.status not in ("pass", "not_supported")]
    assert not bad, bad


def test_the_verdict_fails_a_refusing_device_and_passes_the_torch_device():
    """Full sizes: the verdict of capabilities + L1-injected (the core's evidence)."""
    groups, ctx = ["capabilities", "L1-injected"], Context(seed=0)
    device = VocabRefuser()
    refuser = verdict_of(device, run_conformance(device, ctx, groups), ctx, groups)
    assert refuser["status"] == "fail" and refuser["core_profile"]["met"]
    assert any("check(s) failed or errored" in r for r in refuser["reasons"]), refuser["reasons"]
    device = torch_device.TorchDevice()   # nothing fails; the two groups are a subset of the suite: PARTIAL
    assert verdict_of(device, run_conformance(device, ctx, groups), ctx, groups)["status"] == "partial"


def _call(V: int) -> VerifyBatch:
    return VerifyBatch(np.array([1]), np.array([0]), None, np.zeros((2, V), np.float32),
                       np.ones(1), np.zeros(1, np.int64), np.ones(1))


CAPS = Capabilities(injected_noise=False, rng="philox", max_vocab_size=300, max_k=4, draft_probs=False)


def _refusal(batch, noise=None) -> Refusal:
    class Refuses:
        def verify(self, batch, noise=None):
            raise UnsupportedCall("V <= 300", batch.vocab_size)
    with pytest.raises(Refusal) as caught:
        ask(Refuses(), batch, noise)
    return caught.value


def test_a_refusal_outside_the_declaration_stays_not_supported_naming_the_limit():
    keyed = VerifyBatch(**{**_call(301).__dict__, "seeds": np.ones(1, np.uint64), "positions": np.zeros(1, np.int64)})
    result = refused("x", "L1", _refusal(keyed), CAPS)
    assert result.status == "not_supported"
    assert "outside its declaration (max_vocab_size <= 300 (got 301))" in result.detail
    inside = refused("x", "L1", _refusal(VerifyBatch(**{**keyed.__dict__, "target_logits": np.zeros((2, 300),
                                                                                                      np.float32)})),
                     CAPS)
    assert inside.status == "fail" and "max_vocab_size=300, V=300" in inside.detail


def test_a_refusal_of_an_invalid_call_is_an_error_of_the_check_not_a_verdict_on_the_device():
    result = refused("x", "L1", _refusal(_call(8)), CAPS)   # no noise, no seeds: breaks SPEC §6
    assert result.status == "error" and "breaks SPEC §6" in result.detail


def test_an_unrecorded_refusal_is_an_error_never_not_supported():
    def refuse():
        raise UnsupportedCall("anything")
    _, result = call("x", "L1", refuse, CAPS)
    assert result.status == "error" and "cannot be told" in result.detail
