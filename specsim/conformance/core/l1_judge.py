"""One L1 check: a device's tokens against the reference's, token for token (SPEC §5, §9).

Shared by the L1 groups (``exact``, ``sizes``, ``sampler``); it lives apart from them so that
no group imports another to judge.
"""

from __future__ import annotations

from specsim.conformance.core.calls import ask, call
from specsim.conformance.core.results import CheckResult
from specsim.judge.compare import compare, reference_step


def judge(name: str, device, batch, noise, seed: int | None, note: str = "") -> CheckResult:
    """One L1 check: ``device`` on ``batch`` with ``noise`` (None: its keyed draws) against the
    reference, token for token, SPEC §9's near-tie allowances applied; a crash or refusal is its own
    result, and so is a reference that disagrees with its own exact ladder (``error``)."""
    got, problem = call(name, "L1", lambda: ask(device, batch, noise), device.capabilities)
    if problem:
        return problem
    cmp = compare(batch, got, reference_step(batch, noise), repro=f" [case {name}, seed {seed}]")
    detail = cmp.summary() if not cmp.ok else f"{batch.batch_size} requests agree{note}" + (
        f"; {len(cmp.waived)} allowed as near ties ({cmp.waivers} near-tie decision(s) flipped, SPEC §9)"
        if cmp.waived else "")
    return CheckResult(name, "L1", cmp.status, detail, seed=seed, extra=cmp.extra())
