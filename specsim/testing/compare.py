"""Device output vs the reference, token for token, margin-aware (SPEC §9).

The failure message says where (request, position), by how much (expected
vs got, the reference's margin) and how to reproduce (the case's seed).

>>> import numpy as np
>>> from devices.protocol import VerifyOutput
>>> want = reference_step(_tiny_batch(), None)
>>> got = VerifyOutput(want.output_token_ids.copy(), want.num_accepted.copy())
>>> compare(_tiny_batch(), got, want).ok
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, VerifyBatch, VerifyOutput
from reference.verify import StepResult, verify

TOLERANCE = {"float32": 1e-4, "float64": 1e-9}
"""Relative decision margin under which a device may legitimately differ (SPEC §9)."""


def reference_step(batch: VerifyBatch, noise: Noise | None) -> StepResult:
    """The reference's result for ``batch``: with ``noise``, or keyed noise when None."""
    kwargs = {} if noise is None else {"uniforms": noise.uniforms, "exponentials": noise.exponentials}
    return verify(batch.num_draft_tokens, batch.draft_token_ids, batch.draft_probs, batch.target_logits,
                  batch.temperature, batch.top_k, batch.top_p, seeds=batch.seeds, positions=batch.positions, **kwargs)


@dataclass
class Comparison:
    mismatches: list[str] = field(default_factory=list)   # real failures, one line each
    waived: list[str] = field(default_factory=list)       # differences within the rounding margin
    structure: list[str] = field(default_factory=list)    # shape, dtype, padding problems

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.structure

    def summary(self, limit: int = 5) -> str:
        lines = self.structure + self.mismatches
        more = len(lines) - limit
        text = "\n".join(lines[:limit]) + (f"\n... and {more} more" if more > 0 else "")
        if self.waived:
            text += f"\n({len(self.waived)} request(s) differ within the SPEC §9 rounding margin)"
        return text.strip()


def _check_structure(batch: VerifyBatch, got: VerifyOutput) -> list[str]:
    width = batch.max_k + 1
    out, acc = np.asarray(got.output_token_ids), np.asarray(got.num_accepted)
    problems = []
    if out.shape != (batch.batch_size, width):
        problems.append(f"output_token_ids: shape {out.shape}, expected {(batch.batch_size, width)} (SPEC §7)")
    if acc.shape != (batch.batch_size,):
        problems.append(f"num_accepted: shape {acc.shape}, expected {(batch.batch_size,)} (SPEC §7)")
    if out.dtype.kind not in "iu" or acc.dtype.kind not in "iu":
        problems.append(f"outputs must be integer arrays, got {out.dtype} and {acc.dtype}")
    return problems


def compare(batch: VerifyBatch, got: VerifyOutput, want: StepResult, *, tolerance: float | None = None,
            repro: str = "") -> Comparison:
    """Compare request by request; a request whose reference margin is below ``tolerance`` may differ."""
    tol = TOLERANCE[str(batch.target_logits.dtype)] if tolerance is None else tolerance
    result = Comparison(structure=_check_structure(batch, got))
    if result.structure:
        return result
    K = batch.num_draft_tokens
    for i in range(batch.batch_size):
        expected = want.output_token_ids[i, : want.num_accepted[i] + 1].tolist()
        row = np.asarray(got.output_token_ids[i]).tolist()
        n = int(got.num_accepted[i])
        emitted = row[: n + 1] if 0 <= n <= K[i] else row
        padding_ok = 0 <= n <= K[i] and all(t == PLACEHOLDER_TOKEN_ID for t in row[n + 1:])
        if emitted == expected and padding_ok:
            continue
        pos = next((j for j, (a, b) in enumerate(zip(emitted, expected)) if a != b), min(len(emitted), len(expected)))
        line = (f"request {i} (K={K[i]}, T={batch.temperature[i]:g}, top_k={batch.top_k[i]}, top_p={batch.top_p[i]:g}): "
                f"position {pos}: expected token {expected[pos] if pos < len(expected) else '(none)'}, "
                f"got {row[pos] if pos < len(row) else '(none)'}; expected {expected} with {want.num_accepted[i]} accepted, "
                f"got row {row} with num_accepted={n}" + ("" if padding_ok else " (bad num_accepted or padding)")
                + f"; reference margin {want.margins[i]:.3g}{repro}")
        (result.waived if padding_ok and want.margins[i] < tol else result.mismatches).append(line)
    return result


def _tiny_batch() -> VerifyBatch:
    return VerifyBatch(np.array([1, 0]), np.array([2]), None, np.log(np.full((3, 3), 1 / 3)),
                       np.array([1.0, 0.0]), np.zeros(2, np.int64), np.ones(2),
                       seeds=np.array([1, 2], np.uint64), positions=np.array([0, 0]))
