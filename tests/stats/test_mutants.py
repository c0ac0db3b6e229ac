"""The mutant zoo: at least 20 mutants, each citing a docs/bugs.md entry, each killed by its named check."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest

from specsim.mutants.walk import WalkDevice
from specsim.mutants.zoo import KERNEL, KERNEL_GPU, MUTANTS, SOURCE_MUTANTS, WRAPPERS, make_mutants
from specsim.testing.batches import BatchSpec, random_batch

BUGS = Path(__file__).resolve().parents[2] / "docs" / "bugs.md"


def test_zoo_size_and_citations():
    """Every mutant cites entries that exist in docs/bugs.md (never research notes outside the repository)."""
    entries = set(re.findall(r"^\| (C?\d+) \|", BUGS.read_text(), flags=re.M))
    assert len(MUTANTS) >= 20
    for m in MUTANTS.values():
        assert m.bug and m.killed_by and m.models.startswith("docs/bugs.md "), m.id
        cited = re.findall(r"(?<![\w-])#?(C\d+|(?<=#)\d+)\b", m.models.split("(")[0])
        assert cited and set(cited) <= entries, (m.id, cited)


def _keyed_batches(n: int) -> list:
    rng = np.random.default_rng(0)
    batches = []
    for s in range(n):
        b = random_batch(rng, BatchSpec(batch=8, max_k=4, vocab_size=12, draft_probs=bool(s % 2),
                                        placeholder_fraction=0.1))
        batches.append(type(b)(**{**b.__dict__, "seeds": rng.integers(0, 2**63, 8, dtype=np.uint64),
                                  "positions": rng.integers(0, 2**31, 8)}))
    return batches


def test_mutants_keep_capabilities_and_differ_from_the_base():
    from devices.registry import load
    base = load("torch")
    batches = _keyed_batches(6)
    mutants = make_mutants(base)
    assert len(mutants) == sum(m.device == "torch" for m in SOURCE_MUTANTS) + len(WRAPPERS)
    differing = 0
    for m in mutants:
        assert m.capabilities == base.capabilities
        differing += any(not np.array_equal(m.verify(b).output_token_ids, base.verify(b).output_token_ids)
                         or not np.array_equal(m.verify(b).num_accepted, base.verify(b).num_accepted)
                         for b in batches)
    assert differing >= 12  # the rest need edges (u = 0, ties, placeholders) or RNG contracts to show


FIRST_IN_RUN_ORDER = {
    # torch declares bfloat16: rounding to 16 bits makes argmax ties common, so L1-injected's bfloat16 greedy case
    # (run before L1-edges) meets them first; the tie edge still kills it at every seed (--hunt named).
    "greedy-tie-high": "L1/injected/greedy-only/",
    # L1-injected's random rows at V = 65 often hold nearly equal classes about a top-p cut: the approximate cuts
    # (within 10%) meet them there first; the edge kills both at every seed (--hunt named).
    "top-p-short-of-p": "L1/injected/",
    "top-p-past-p": "L1/injected/",
    # its rows past a second launch (B > 256) are read one row off: SPEC 1.9's edges at batch sizes (L1-edges, run
    # before L1-sizes) fill batches of 257 and more, so an edge's copies there meet it first
    "second-launch-row-offset": "L1/edge/bonus-from-last-row/batches",
    # the bfloat16 twin of SPEC 1.6's temperature band (L1-edges, run before L1-16bit): the fallback rows' softmax
    # rounded to 16 bits races token 3 where the row at T gives 2, at every temperature of the band
    "softmax-in-16-bit": "L1/edge/empty-residual-temperature-band/bfloat16",
}
"""Mutants whose first failing check in run order is an earlier group's, not their named one: mutant → that check."""


TORCH_MUTANTS = [m.id for m in SOURCE_MUTANTS if m.device == "torch"] + [w.id for w in WRAPPERS]


@functools.lru_cache(maxsize=1)
def _torch_mutants() -> dict:
    from devices.registry import load
    return {m.id: m for m in make_mutants(load("torch"))}


@pytest.mark.parametrize("mutant_id", TORCH_MUTANTS)
def test_every_mutant_is_killed_by_its_named_check(mutant_id):
    """``specsim mutants --hunt named`` in miniature (quick sizes): each mutant judged by its named check's group
    alone fails first at that check (the whole suite in run order: the slow test below)."""
    from specsim.conformance.run.runner import Context
    from specsim.mutants.runner import judge_mutant
    from specsim.mutants.seedtable import killing_groups
    m = _torch_mutants()[mutant_id]
    v = judge_mutant(m, Context(quick=True), groups=killing_groups(m.killed_by, False))
    assert v.killed and v.killer.name.startswith(m.killed_by), (m.killed_by, v.killer.name if v.killer else "SURVIVED")


def test_a_group_stopped_at_its_first_failure_names_the_same_killer():
    """``run_group(..., stop_at_first_fail=True)`` (what ``specsim mutants`` runs): L1-sampler ends after the part
    holding its first failure — here its first part, the edges, which the whole group reports first — so the first
    failure is the same check. Groups outside ``STOPS_EARLY`` run whole."""
    from specsim.conformance.checks.sampler.group import edge_checks
    from specsim.conformance.run.runner import STOPS_EARLY, Context, run_group
    m, ctx = _torch_mutants()["sampler-bonus-only"], Context(quick=True)
    edges = edge_checks(m, ctx)
    stopped = run_group("L1-sampler", m, ctx, stop_at_first_fail=True)
    assert [r.name for r in stopped] == [r.name for r in edges] and any(r.status == "fail" for r in edges)
    assert [r.status for r in stopped] == [r.status for r in edges]
    assert STOPS_EARLY == {"L1-edges", "L1-sampler", "L3-statistical"}


@pytest.mark.slow
def test_every_mutant_dies_first_at_its_named_check_in_run_order():
    """``specsim mutants`` in miniature over every group in run order (quick L3 sizes): every mutant dies in an
    exact layer first, at its named check or the earlier one ``FIRST_IN_RUN_ORDER`` records."""
    from devices.registry import load
    from specsim.conformance.run.runner import Context
    from specsim.mutants.runner import judge_mutant
    wrong = []
    for m in make_mutants(load("torch")):
        v = judge_mutant(m, Context(quick=True))
        if not v.killed or not v.killer.name.startswith(FIRST_IN_RUN_ORDER.get(m.id, m.killed_by)):
            wrong.append((m.id, m.killed_by, v.killer.name if v.killer else "SURVIVED"))
    assert not wrong, f"(mutant, expected killer, actual): {wrong}"


@pytest.mark.needs_extra("triton")
@pytest.mark.parametrize("mutant", KERNEL, ids=lambda m: m.id)
def test_triton_mutant_is_killed_by_its_named_check(mutant):
    """Each Triton-kernel mutant fails its named L1 check in the interpreter, and the unmutated kernels
    at the same launch shape pass it (so the edit, not the shape, is what the check sees). One check,
    not the whole hunt: the interpreter is slow (``specsim mutants --base triton-interpret`` runs it all)."""
    from specsim.conformance.run.one_check import one_check
    from specsim.conformance.run.runner import Context
    from specsim.mutants.source import SourceMutant
    control = SourceMutant("control", "", "", mutant.module, (), device=mutant.device, make_from=mutant.make_from)
    try:
        broken, correct = mutant.make(), control.make()
    except RuntimeError as e:  # a process already running Triton compiled (GPU runs); absent: needs_extra
        pytest.skip(str(e))
    ctx = Context(quick=True)
    assert one_check(correct, ctx, mutant.killed_by).status == "pass"
    result = one_check(broken, ctx, mutant.killed_by)
    assert result.status == "fail", (mutant.id, result.status, result.detail)


@pytest.mark.needs_extra("triton")
@pytest.mark.parametrize("mutant", KERNEL_GPU, ids=lambda m: m.id)
def test_gpu_triton_mutant_is_killed_by_its_named_check(mutant):
    """Each compiled-only Triton mutant fails its named check on a CUDA GPU (at a per-call budget that holds the
    check's call), and the unmutated kernels pass it. ``specsim mutants --base triton --only <id> --seeds 0-19
    --call-bytes 6GiB`` runs the 20 seeds (tools/gpu/offsets.sh)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: a call of 2^31 elements is out of the Triton interpreter's reach in a test")
    from specsim.conformance.run.one_check import one_check
    from specsim.conformance.run.runner import Context
    from specsim.mutants.source import SourceMutant
    control = SourceMutant("control", "", "", mutant.module, (), device=mutant.device, make_from=mutant.make_from)
    try:
        broken, correct = mutant.make(), control.make()
    except RuntimeError as e:  # a process already running Triton interpreted
        pytest.skip(str(e))
    ctx = Context(call_bytes=6 << 30)
    assert one_check(correct, ctx, mutant.killed_by).status == "pass"
    result = one_check(broken, ctx, mutant.killed_by)
    assert result.status in ("fail", "error"), (mutant.id, result.status, result.detail)


def test_walk_without_hooks_is_the_reference():
    """The numpy walk (the L3 tests' buggy-sampler fixture) is correct when no hook is on."""
    from reference.verify import verify
    dev = WalkDevice()
    for s in range(60):
        rng = np.random.default_rng(s)
        b = random_batch(rng, BatchSpec(batch=6, max_k=4, vocab_size=int(rng.integers(2, 40)),
                                        draft_probs=bool(s % 3)))
        seeds, positions = rng.integers(0, 2**63, 6, dtype=np.uint64), rng.integers(0, 2**31, 6)
        b = type(b)(**{**b.__dict__, "seeds": seeds, "positions": positions})
        out = dev.verify(b)
        ref = verify(b.num_draft_tokens, b.draft_token_ids, b.draft_probs, b.target_logits, b.temperature,
                     b.top_k, b.top_p, seeds=seeds, positions=positions)
        assert np.array_equal(out.output_token_ids, ref.output_token_ids), s
        assert np.array_equal(out.num_accepted, ref.num_accepted), s
