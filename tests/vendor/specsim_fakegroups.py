"""Fake conformance groups for the isolation tests (the real ones live in specsim/conformance/).

Each group runs a few greedy verification steps at one vocabulary size and
checks the emitted tokens against the argmax; the sizes are the ones the
broken fixture devices in ``specsim_fakedev`` trip on.
"""

from __future__ import annotations

import numpy as np

from devices.protocol import VerifyBatch
from specsim.conformance.core.results import CheckResult

from specsim_fakedev import ABORT_VOCAB, HANG_VOCAB, RAISE_VOCAB

FAKE_GROUPS = {
    "F1-ok": "specsim_fakegroups:ok_group",
    "F2-abort": "specsim_fakegroups:abort_group",
    "F3-hang": "specsim_fakegroups:hang_group",
    "F4-raise": "specsim_fakegroups:raise_group",
    "F5-ok": "specsim_fakegroups:ok_group_2",
}


def _greedy_case(vocab_size: int, seed: int):
    """A 3-request greedy batch and its emitted tokens: ``(VerifyBatch, [[token, ...] per request])``."""
    rng = np.random.default_rng(seed)
    num_draft_tokens = np.array([2, 0, 1], dtype=np.int64)
    target_logits = rng.normal(size=(int(num_draft_tokens.sum()) + 3, vocab_size))  # [num_tokens + batch, V]
    argmax = target_logits.argmax(-1)
    # request 0 drafts the argmax then a wrong token; request 2 drafts the argmax
    draft_token_ids = np.array([argmax[0], (argmax[1] + 1) % vocab_size, argmax[4]], dtype=np.int64)
    batch = VerifyBatch(num_draft_tokens, draft_token_ids, None, target_logits, np.zeros(3),
                        np.zeros(3, dtype=np.int64), np.ones(3))
    expected = [[argmax[0], argmax[1]], [argmax[3]], [argmax[4], argmax[5]]]
    return batch, expected


def _check(device, vocab_size: int, ctx, name: str) -> list[CheckResult]:
    batch, expected = _greedy_case(vocab_size, ctx.seed + vocab_size)
    out = device.verify(batch)
    got = [out.emitted(i) for i in range(batch.batch_size)]
    want = [[int(t) for t in row] for row in expected]
    status = "pass" if got == want else "fail"
    return [CheckResult(name=f"{name}/greedy/V{vocab_size}", layer=name.split("-")[0], status=status,
                        detail="" if status == "pass" else f"emitted {got}, expected {want}", seed=ctx.seed)]


def ok_group(device, ctx):
    return _check(device, 8, ctx, "F1-ok")


def abort_group(device, ctx):
    return _check(device, 8, ctx, "F2-abort") + _check(device, ABORT_VOCAB, ctx, "F2-abort")


def hang_group(device, ctx):
    return _check(device, HANG_VOCAB, ctx, "F3-hang")


def raise_group(device, ctx):
    return _check(device, RAISE_VOCAB, ctx, "F4-raise")


def ok_group_2(device, ctx):
    return _check(device, 11, ctx, "F5-ok")
