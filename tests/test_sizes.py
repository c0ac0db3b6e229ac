"""L1-sizes and L2-sizes: the cases do what they claim; a correct device passes; a device
with malformed output gets a failing check in every group, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

from devices.protocol import VerifyOutput
from specsim.conformance.run.runner import Context, run_group
from specsim.conformance.checks.chain.sizes import (FILTER_REQUESTS, RESIDUAL_TVS, filter_batch, small_residual_batch, sizes_group,
                                       spread_tokens, strided_ids, vocab_batch)
from specsim.judge.compare import reference_step

torch_device = pytest.importorskip("devices.torch_device")


def _emitted(step) -> np.ndarray:
    return step.output_token_ids[np.arange(len(step.num_accepted)), step.num_accepted]


@pytest.mark.parametrize("tiny", [False, True])
@pytest.mark.parametrize("tv", RESIDUAL_TVS)
def test_small_residual_rejects_and_keeps_a_nonempty_residual(tv, tiny):
    batch, noise = small_residual_batch(np.random.default_rng(3), tv, tiny, "float64")
    rows = batch.target_logits[0::2].astype(np.float64)
    target = np.exp(rows - rows.max(axis=1, keepdims=True))
    target /= target.sum(axis=1, keepdims=True)
    residual = np.maximum(target - batch.draft_probs, 0)
    real = residual > 1e-12  # what the construction put there (rounding leaves ~1e-17 elsewhere)
    assert (residual.sum(axis=1) <= tv * (1 + 1e-6)).all() and (residual.sum(axis=1) > 0).all()
    assert ((real.sum(axis=1) == 8) if tiny else (real.sum(axis=1) == 1)).all()
    step = reference_step(batch, noise)
    assert (step.num_accepted == 0).all()  # every coin rejects
    assert real[np.arange(batch.batch_size), _emitted(step)].all()  # the emission is a residual token


def test_vocab_cases_reach_the_last_ids():
    caps = torch_device.CAPABILITIES
    emitted = []
    for V in (127, 4097, 32000):
        batch, noise = vocab_batch(np.random.default_rng(V), V, caps)
        emitted += [(V, int(x)) for x in _emitted(reference_step(batch, noise))]
    assert all(x in spread_tokens(V).tolist() for V, x in emitted)
    assert any(x >= V - 3 for V, x in emitted)


def test_filter_cases_emit_the_least_likely_kept_token():
    """The noise of ``filter_batch`` makes the emission tell the kept set: the reference emits each
    row's least likely kept token, and the largest dropped logit (exponential 1e-30) is not kept."""
    from reference.target import target_rows
    caps = torch_device.CAPABILITIES
    for V in (4097, 32000):
        batch, noise = filter_batch(np.random.default_rng(V), V, caps)
        emitted = _emitted(reference_step(batch, noise))
        for i, token in enumerate(emitted):
            kept = target_rows(batch.target_logits[i:i + 1].astype(np.float64), np.ones(1), batch.top_k[i:i + 1],
                               batch.top_p[i:i + 1])[0][0] > 0
            assert noise.exponentials[i, token] == 1e-20 and kept[token], (V, i)
            assert not kept[np.argmin(noise.exponentials[i])], (V, i)
            assert 0 < kept.sum() < V, (V, i)
            if FILTER_REQUESTS[i][3]:  # four equal logits across the k-th: every copy kept
                assert kept.sum() == batch.top_k[i] + 2, (V, i)


def test_strided_ids_are_distinct_and_share_lanes():
    ids = strided_ids(16385, 2048, 58)
    assert len(set(ids.tolist())) == 58 and ids.max() == 16384
    assert np.bincount(ids % 2048).max() > 4  # more than a four-entry lane can hold


def test_correct_device_passes_the_size_groups():
    device = torch_device.make_cpu_device()
    for group in ("L1-sizes", "L2-sizes"):
        results = run_group(group, device, Context(quick=True))
        # SPEC 1.6's support checks are for a device without injected noise; this one is held to exact tokens
        own_draws = [r for r in results if r.name.startswith("L1/sizes/support/")]
        assert {r.status for r in own_draws} == ({"not_supported"} if group == "L1-sizes" else set())
        assert results and all(r.status == "pass" for r in results if r not in own_draws), \
            [(r.name, r.detail) for r in results if r.status != "pass" and r not in own_draws]


class Malformed:
    """The torch device with one thing wrong in its output (SPEC §7)."""

    def __init__(self, how: str):
        self.inner, self.how = torch_device.make_cpu_device(), how
        self.name, self.capabilities = f"malformed-{how}", self.inner.capabilities

    def verify(self, batch, noise=None):
        out = self.inner.verify(batch, noise)
        ids, acc = np.array(out.output_token_ids), np.array(out.num_accepted)
        if self.how == "shape":
            return VerifyOutput(ids[:-1], acc[:-1])
        if self.how == "range":
            ids[np.arange(len(acc)), acc] = batch.vocab_size + 5
        if self.how == "padding":
            ids[:, -1] = 0
        if self.how == "num-accepted":
            acc = acc + 7
        return VerifyOutput(ids, acc)


@pytest.mark.parametrize("how", ["shape", "range", "padding", "num-accepted"])
def test_malformed_output_is_a_failing_check_in_every_group(how):
    from specsim.conformance.checks.chain.statistical import statistical_group
    device, ctx = Malformed(how), Context(quick=True)
    per_group = {
        "L1-injected": run_group("L1-injected", device, ctx)[:3],
        "L1-sizes": sizes_group(device, ctx, only="L1/sizes/batch-B33"),
        "L2-rng": run_group("L2-rng", device, ctx),
        "L2-sizes": run_group("L2-sizes", device, ctx),
        "L3-statistical": statistical_group(device, ctx, cases={"v8-hetero"}),
    }
    for group, results in per_group.items():
        assert not [r for r in results if r.status == "error"], (group, [r.detail for r in results])
        assert [r for r in results if r.status == "fail"], group
    for group in ("L2-rng", "L2-sizes"):
        (result,) = [r for r in per_group[group] if r.status == "fail"]
        assert result.name == "L2/well-formed-output" and "SPEC §7" in result.detail
