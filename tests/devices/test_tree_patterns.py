"""L1-trees' constructed sibling patterns and engine-sized trees (SPEC §11): they pass on the correct
device, their noise sits where a wrong rule shows, and each tree mutant fails its named pattern."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from devices.protocol import Noise
from devices.torch_device import make_cpu_device
from reference.tree import depths
from specsim.conformance.cases import tree_patterns as tpc
from specsim.conformance.checks.trees import patterns as tp
from specsim.conformance.run.runner import Context
from specsim.conformance.checks.trees.sizes import ENGINE_CASES, QUICK_V, engine_requests, ragged_requests, size_checks
from specsim.conformance.core.black_box import BlackBox
from specsim.mutants.zoo import TREE
from specsim.testing.trees import reference_tree_step


def test_patterns_pass_on_torch_with_and_without_injected_noise():
    device = make_cpu_device()
    for d in (device, BlackBox(device)):
        results = tp.pattern_checks(d, Context(quick=True, seed=5))
        assert len(results) == len(tpc.PATTERNS)
        assert {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results if r.status != "pass"]
    laws = [r for r in tp.pattern_checks(BlackBox(device), Context(quick=True)) if r.alpha is not None]
    assert laws and all(0 < r.detectable_tv < 1 for r in laws)


def test_every_pattern_scheme_and_layout_is_there():
    names = {(p.scheme, p.name) for p in tpc.PATTERNS}
    for scheme in ("rrs", "sglang", "greedy"):
        for layout in ("placeholder-first", "placeholder-between", "placeholder-last", "duplicates",
                       "leaves-every-depth", "empty-beside-big"):
            assert (scheme, layout) in names
    assert {("rrs", "with-replacement"), ("rrs", "without-replacement"), ("rrs", "point")} <= names
    leaves = next(p for p in tpc.PATTERNS if p.name == "leaves-every-depth").trees[0]
    kids = [n for n in range(len(leaves.parents)) if n not in leaves.parents]
    assert sorted({depths(leaves.parents)[n] for n in kids}) == [1, 2, 3, 4]


@pytest.mark.parametrize("pattern", [p for p in tpc.PATTERNS if p.scheme != "greedy"], ids=lambda p: p.check)
def test_probe_coins_straddle_every_threshold(pattern):
    """Moving every coin by a relative 0.2 % (twice δ's largest) up, or down, changes the reference's
    output for some probe: each probe's coin sits within δ of a threshold, on both sides."""
    batch, noise = tp.probe_batch(pattern, seed=11, dtype="float64")
    want = reference_tree_step(batch, noise).output_token_ids
    for factor in (1.002, 0.998):
        moved = Noise(np.clip(noise.uniforms * factor, 0.0, np.nextafter(1.0, 0.0)), noise.exponentials)
        assert not np.array_equal(reference_tree_step(batch, moved).output_token_ids, want), factor


@pytest.mark.parametrize("pattern", [p for p in tpc.PATTERNS if p.scheme == "rrs"][:3], ids=lambda p: p.check)
def test_probe_races_follow_each_residual(pattern):
    """Lowering the designated winner's weight by a relative 1 % (an E 1 % higher) changes the emitted
    token of every probe whose residual has two tokens or more: the race is a near-tie by construction."""
    batch, noise = tp.probe_batch(pattern, seed=3, dtype="float64")
    want = reference_tree_step(batch, noise)
    rows = np.arange(batch.batch_size)
    emitted = want.output_token_ids[rows, want.num_accepted]
    E = noise.exponentials.copy()
    E[rows, emitted] *= 1.01
    moved = reference_tree_step(batch, Noise(noise.uniforms, E))
    contested = (noise.exponentials > 10 * tp.TINY_E).sum(axis=1) >= 2
    assert contested.sum() >= batch.batch_size // 2
    assert (moved.output_token_ids[rows, moved.num_accepted] != emitted)[contested].all()


def test_pattern_rows_with_a_near_coincidence_are_refused():
    q = tpc.Q_ROOT
    near = (q[0] + 1e-9, q[1] + 0.2, q[2] - 0.2, q[3], q[4] - 1e-9)   # t(0), t(4) a hair off the drafter's
    t = tpc.tree((-1,), (1,), "with", rows={0: (near, q)})
    with pytest.raises(ValueError, match="pattern rows: at slot 0, sibling 0's residual and draft row nearly tie"):
        tp.probes(tpc.as_sent(t, "float64"), "rrs", np.random.default_rng(0))
    tiny = (0.5, 0.3, 0.2 - 1e-9, 1e-9, 0.0)                       # sglang leaves t(3) = 1e-9 in the residual
    t = tpc.tree((-1,), (1,), "point", rows={0: (tiny, tpc.Q_ROOT)})
    with pytest.raises(ValueError, match="pattern rows: the residual at slot 0 has a positive entry"):
        tp.probes(tpc.as_sent(t, "float64"), "sglang", np.random.default_rng(0))


def test_pattern_rows_where_target_meets_draft_are_refused():
    """t(v) = d(v) > 0: a device's softmax one ulp off would leave max(t − d, 0) positive where the reference's
    is 0 (and the probe's race gives such a token the tiny E)."""
    tied = (0.10, 0.35, 0.25, 0.05, 0.25)                          # tokens 0, 1, 3 equal Q_ROOT's
    t = tpc.tree((-1,), (2,), "with", rows={0: (tied, tpc.Q_ROOT)})
    with pytest.raises(ValueError, match="nearly tie at token 0"):
        tp.probes(tpc.as_sent(t, "float64"), "rrs", np.random.default_rng(0))


def test_pattern_laws_are_tests_of_the_runs_plan():
    """Without injected noise each request of a sampled pattern is one goodness-of-fit test of the run's
    plan (group L1-trees, n = the pattern's samples), and the law check runs each at its α there."""
    from specsim.conformance.stats.plan import run_plan
    device = BlackBox(make_cpu_device())
    ctx = Context(quick=True)
    plan = run_plan(device.capabilities, ctx)
    planned = plan.of_group("L1-trees")
    assert len(planned) == sum(len(p.trees) for p in tpc.PATTERNS if p.scheme != "greedy")
    assert all(t.n == tpc.QUICK_SAMPLES and 0 < t.detectable_tv < 1 for t in planned)
    assert not run_plan(make_cpu_device().capabilities, ctx).of_group("L1-trees")
    without = run_plan(replace(device.capabilities, tree_schemes=()), ctx)
    assert not without.of_group("L1-trees") and without.tests[-1].alpha > plan.tests[-1].alpha
    pattern = next(p for p in tpc.PATTERNS if p.name == "empty-beside-big" and p.scheme == "rrs")
    result, = tp.pattern_checks(device, ctx, only=pattern.check)
    tests = [t for t in planned if t.check == pattern.check]
    assert [t.name for t in tests] == [f"{pattern.check}/request0", f"{pattern.check}/request1"]
    assert result.status == "pass" and result.alpha == plan.alpha(tests[0].name)
    assert result.extra["tests"] == [t.name for t in tests]


@pytest.mark.parametrize("mutant", [m for m in TREE if m.killed_by.startswith("L1/trees/pattern/")],
                         ids=lambda m: m.id)
def test_each_tree_mutant_fails_its_named_pattern(mutant):
    """With injected noise (exact) and in black box (the pattern's law, full size), at three suite seeds
    (``tools/tree_mutant_seeds.py`` runs twenty)."""
    device = mutant.make()
    for seed in (0, 7, 19):
        ctx = Context(seed=seed)
        for d in (device, BlackBox(device)):
            result, = tp.pattern_checks(d, ctx, only=mutant.killed_by)
            assert result.status == "fail", (mutant.id, seed, d.name, result.detail)


# --- engine-sized trees ------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_engine_trees_have_64_nodes_at_depth_six_and_steered_requests_reach_it(seed):
    rng = np.random.default_rng(seed)
    for case in ENGINE_CASES:
        requests = engine_requests(rng, case, QUICK_V, greedy=True)
        tree = requests[0].tree
        assert len(tree.parents) >= 64 and max(depths(tree.parents.tolist())) == 6, case.shape
    results = size_checks(make_cpu_device(), Context(quick=True, seed=seed))
    engine = [r for r in results if r.name.startswith("L1/trees/engine/")]
    assert len(engine) == 2 * len(ENGINE_CASES) and {r.status for r in results} == {"pass"}
    assert all("steered requests accepted 6–6 nodes" in r.detail for r in engine if r.name.endswith("/injected"))


def test_ragged_batches_mix_trees_chains_and_empty_requests():
    requests = ragged_requests(np.random.default_rng(0), 129, 32, "point", greedy=True)
    sizes = [len(r.tree.parents) for r in requests]
    assert 0 in sizes and max(sizes) >= 64 and any(0 < s <= 6 for s in sizes)
    assert any(r.greedy for r in requests) and any(r.steered for r in requests)


def test_the_seed_table_tool_runs():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "tools" / "tree_mutant_seeds.py"
    spec = importlib.util.spec_from_file_location("tree_mutant_seeds", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["--seeds", "2", "--only", "tree-duplicate-skipped", "--quick"]) == 0
