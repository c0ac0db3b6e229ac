"""L1-declared and L3-declared: every declared limit is called at its value with the law checked, in every
noise mode the device declares; a device wrong only past the core's sizes fails, naming the size."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from devices.protocol import UnsupportedCall, VerifyOutput
from specsim.conformance.cases import declared as declared_cases
from specsim.conformance.run.runner import Context, run_group

torch_device = pytest.importorskip("devices.torch_device")

QUICK = Context(quick=True)


class Wrong:
    """The torch device under another declaration, its output edited where ``wrong(batch)`` says: ``shift``
    maps every token id >= ``above`` to id - 1 (a truncated or misplaced index), ``bump`` moves the last
    emitted token of each request with K > ``above`` to the next id. ``own_rng``: it ignores given noise
    and declares none (a black box drawing its own)."""

    def __init__(self, capabilities, wrong, edit: str, above: int, own_rng: bool = False):
        self.inner = torch_device.make_cpu_device()
        self.name = "wrong"
        self.capabilities = capabilities
        self.wrong, self.edit, self.above, self.own_rng = wrong, edit, above, own_rng

    def verify(self, batch, noise=None):
        if noise is not None and not self.capabilities.injected_noise:
            raise UnsupportedCall("injected noise")
        out = self.inner.verify(batch, None if self.own_rng else noise)
        if not self.wrong(batch):
            return out
        ids, acc = out.output_token_ids.copy(), out.num_accepted
        if self.edit == "shift":
            ids = np.where(ids >= self.above, ids - 1, ids)
        else:
            for i, k in enumerate(batch.num_draft_tokens):
                if k > self.above:
                    ids[i, acc[i]] = (ids[i, acc[i]] + 1) % batch.vocab_size
        return VerifyOutput(ids, acc)


def _caps(**changes):
    return replace(torch_device.CAPABILITIES, tree_schemes=(), **changes)


def _failing(results):
    return [r for r in results if r.status == "fail"]


def test_declared_sizes_follow_the_declaration():
    caps = _caps(max_vocab_size=1 << 30, max_k=16)
    vocab = declared_cases.vocab_limits(caps)
    assert [v.value for v in vocab] == [262_144, declared_cases.VOCAB_CAP]
    assert "GiB" in vocab[1].capped and vocab[1].declared == 1 << 30
    assert [k.value for k in declared_cases.k_limits(caps)] == [8, 16]
    nodes, depth = declared_cases.tree_limits(torch_device.CAPABILITIES)
    assert (nodes.value, depth.value) == (1024, 256)


def test_support_batches_keep_neighbours_apart_and_reach_the_last_ids():
    caps = torch_device.CAPABILITIES
    V = 262_144
    reqs = declared_cases.support_requests(V, caps)
    dominant = {r.supports[-1][0] for r in reqs}
    assert {V - 1, V - 2, V - 3, 2**15, 2**16 - 1, 2**17} <= dominant
    for r in reqs:
        for ids in r.supports:
            assert np.diff(sorted(ids)).min() > 1
    whats = {r.what for r in reqs}
    assert {"greedy", "top-k", "top-p", "reject-outside", "accept-inside"} <= whats


@pytest.fixture(scope="module")
def torch_runs():
    device = torch_device.make_cpu_device()
    return {g: run_group(g, device, QUICK) for g in ("L1-declared", "L3-declared")}


def test_the_torch_device_passes_every_declared_size_in_every_mode(torch_runs):
    results = torch_runs["L1-declared"] + torch_runs["L3-declared"]
    assert not [r for r in results if r.status != "pass"], [(r.name, r.detail[:300]) for r in results
                                                           if r.status != "pass"]
    scopes = [r.extra["scope"] for r in results]
    assert all(set(s) == {"mode", "V", "K", "batch", "tree_nodes"} for s in scopes)
    for mode in ("injected", "keyed", "device-rng"):
        mine = [s for s in scopes if s["mode"] == mode]
        assert max(s["V"] for s in mine) == 262_144
        assert max(s["K"] for s in mine) == 256
        assert max(s["tree_nodes"] for s in mine) == 1024
        assert max(s["batch"] for s in mine) >= 257
    laws = [r for r in torch_runs["L3-declared"] if r.alpha is not None]
    assert {r.name for r in laws} == {"L3/declared/law/vocab-V262144", "L3/declared/law/K256"}
    assert all(r.n and r.p_value is not None and r.extra["alpha_share"] > 0 for r in laws)


def test_the_plan_lists_the_laws_with_n_and_detectable_tv():
    from specsim.conformance.stats.plan import run_plan
    caps = replace(torch_device.CAPABILITIES, max_vocab_size=1 << 19)
    tests = run_plan(caps, QUICK).of_group("L3-declared")
    assert [t.name for t in tests] == ["L3/declared/law/vocab-V262144", "L3/declared/law/vocab-V524288",
                                       "L3/declared/law/K256"]
    assert [t.n for t in tests] == [declared_cases.QUICK_LAW_SAMPLES] * 2 + [declared_cases.QUICK_DEEP_LAW_SAMPLES]
    assert all(t.detectable_tv or t.note for t in tests)
    assert not run_plan(replace(caps, rng="none"), QUICK).of_group("L3-declared")


def test_a_black_box_wrong_above_100000_fails_naming_v():
    caps = _caps(injected_noise=False, rng="seeded", max_k=8)
    device = Wrong(caps, lambda b: b.vocab_size > 100_000, "shift", 100_000, own_rng=True)
    failing = _failing(run_group("L3-declared", device, QUICK))
    assert "L3/declared/support/vocab-V262144" in {r.name for r in failing}
    assert all("V=262144" in r.detail for r in failing)


def test_an_injected_device_wrong_above_256000_fails():
    caps = _caps(rng="none", max_k=8)
    device = Wrong(caps, lambda b: b.vocab_size > 256_000, "bump", -1)
    failing = _failing(run_group("L1-declared", device, QUICK))
    # SPEC 1.5: its empty residual at that V too
    assert [r.name for r in failing] == ["L1/declared/injected/vocab-V262144",
                                         "L1/declared/injected/empty-residual-V262144"]
    assert all("V=262144" in r.detail for r in failing)


@pytest.mark.parametrize("rng", ["none", "seeded"])
def test_a_device_declaring_max_k_16_wrong_past_k_8_fails_naming_k(rng):
    caps = _caps(max_k=16, injected_noise=rng == "none", rng=rng, max_vocab_size=4096)
    device = Wrong(caps, lambda b: b.max_k > 8, "bump", 8, own_rng=rng != "none")
    group = "L1-declared" if rng == "none" else "L3-declared"
    failing = _failing(run_group(group, device, QUICK))
    assert failing and all("K=16" in r.detail for r in failing)
    # SPEC 1.5's empty residual at K and 1.7's at every position of it
    assert {r.name.split("/")[-1] for r in failing} <= {"K16", "empty-residual-K16", "empty-residual-positions-K16"}


def test_a_device_wrong_only_past_the_core_vocabulary_fails_at_its_declared_one():
    caps = _caps(rng="none", max_k=8, max_vocab_size=1 << 19)
    device = Wrong(caps, lambda b: b.vocab_size > 262_144, "bump", -1)
    results = run_group("L1-declared", device, QUICK)
    assert [r.name for r in _failing(results)] == ["L1/declared/injected/vocab-V524288",
                                                   "L1/declared/injected/empty-residual-V524288"]   # SPEC 1.5
    assert max(r.extra["scope"]["V"] for r in results) == 1 << 19


def test_an_undeclared_node_limit_is_checked_at_specs_default():
    """``max_tree_nodes`` undeclared (None): the declared-limit tree is SPEC §11.1's default, every device's duty."""
    from tests.fixtures.spec_1_0_device import Spec10Device
    from specsim.conformance.cases.declared import tree_limits
    device = Spec10Device()
    assert device.capabilities.max_tree_nodes is None
    nodes, _ = tree_limits(device.capabilities)
    assert nodes.value == device.capabilities.tree_node_limit
    results = run_group("L1-declared", device, Context(quick=True))
    trees = [r for r in results if "/tree-" in r.name]
    assert trees and all(r.status == "pass" for r in results), [(r.name, r.status) for r in results if r.status != "pass"]
