"""``specsim replay``: re-run one failing L1 check against a device, alone, and show its calls.

Every L1 case is a deterministic function of the suite seed and its name, so one check can be run
again without its group: ``specsim replay --device SPEC --seed N CHECK`` runs exactly the check
``specsim conform`` named (``specsim.conformance.run.one_check.one_check``), records every call it made
(batch, noise, the device's answer), and prints, call by call, the requests whose tokens differ
from the reference's with what the reference emits there. ``--npz FILE`` writes those calls as
arrays a vendor can attach to a bug report and load without specsim (``numpy.load``).
"""

from __future__ import annotations

import sys

HELP = "re-run one failing L1 check against a device and print (or save as .npz) each call, expected and got"

_BATCH_FIELDS = ("num_draft_tokens", "draft_token_ids", "draft_probs", "target_logits", "temperature", "top_k",
                 "top_p", "seeds", "positions", "withdrawn")


def add_arguments(p) -> None:
    p.add_argument("check", help="the check's name, as specsim conform printed it (e.g. L1/injected/full-mixed/V8/float32)")
    p.add_argument("--device", default="torch", help="registered name or 'module:attr' (default: torch)")
    p.add_argument("--seed", type=int, default=0, help="the suite seed of the run that failed (default 0)")
    p.add_argument("--quick", action="store_true", help="the --quick sizes (when the failing run was --quick)")
    p.add_argument("--npz", default=None, metavar="FILE", help="write every call (batch, noise, got, expected) here")


class Recorder:
    """The device, with every call it answered kept in ``calls`` as ``(batch, noise, output)``."""

    def __init__(self, device):
        self._device, self.calls = device, []

    def __getattr__(self, name):
        return getattr(self._device, name)

    def verify(self, batch, noise=None):
        out = self._device.verify(batch, noise)
        self.calls.append((batch, noise, out))
        return out

    def verify_tree(self, batch, noise=None):
        out = self._device.verify_tree(batch, noise)
        self.calls.append((batch, noise, out))
        return out


def _expected(batch, noise):
    """The reference's step for a chain call (None for a tree call or one the reference cannot replay)."""
    from devices.protocol import VerifyBatch
    from specsim.judge.compare import reference_step
    if not isinstance(batch, VerifyBatch):
        return None
    try:
        return reference_step(batch, noise)
    except Exception:  # an edge the reference refuses is the check's own business; nothing to show here
        return None


def _differences(batch, out, want) -> list[str]:
    """The requests of one call that differ from the reference, as the judge describes them (``compare``: the
    emission at the first difference, and whether a near tie explains it)."""
    from specsim.judge.compare import compare
    cmp = compare(batch, out, want)
    return [f"    {line}" for line in cmp.structure + cmp.mismatches + cmp.errors] + \
        [f"    (a near tie, allowed) {line}" for line in cmp.waived]


def _arrays(calls) -> dict:
    arrays = {}
    for c, (batch, noise, out) in enumerate(calls):
        for f in _BATCH_FIELDS:
            value = getattr(batch, f, None)
            if value is not None:
                arrays[f"call{c}_{f}"] = value
        if noise is not None:
            arrays[f"call{c}_noise_uniforms"] = noise.uniforms
            arrays[f"call{c}_noise_exponentials"] = noise.exponentials
        arrays[f"call{c}_got_output_token_ids"] = out.output_token_ids
        arrays[f"call{c}_got_num_accepted"] = out.num_accepted
        want = _expected(batch, noise)
        if want is not None:
            arrays[f"call{c}_expected_output_token_ids"] = want.output_token_ids
            arrays[f"call{c}_expected_num_accepted"] = want.num_accepted
    return arrays


def run(args) -> int:
    import numpy as np

    from devices.registry import load
    from specsim.conformance.run.one_check import REPLAYABLE, one_check, replayable
    from specsim.conformance.run.runner import Context

    if not replayable(args.check):
        print(f"specsim replay: check: {args.check!r} is not one an L1 check can be run alone from; replayable "
              f"checks start with {', '.join(REPLAYABLE)} (not L1-sampler/edge/ but its .../batches), or are "
              "L1/declared/<mode>/empty-residual-positions-K<K> or -between-K<K>", file=sys.stderr)
        return 2
    recorder = Recorder(load(args.device))
    try:
        result = one_check(recorder, Context(seed=args.seed, quick=args.quick), args.check)
    except ValueError as e:
        print(f"specsim replay: {e}", file=sys.stderr)
        return 2
    print(f"{result.status}  {result.name}")
    print("\n".join(f"  {line}" for line in (result.detail or "").splitlines()))
    for c, (batch, noise, out) in enumerate(recorder.calls):
        want = _expected(batch, noise)
        shape = (f"B={batch.batch_size}, V={batch.vocab_size}, dtype={np.asarray(batch.target_logits).dtype.name}, "
                 f"{'injected noise' if noise is not None else 'no noise'}")
        diffs = _differences(batch, out, want) if want is not None else []
        print(f"call {c}: {shape}: " + (f"{len(diffs)} request(s) differ from the reference" if diffs else
                                        "no request differs" if want is not None else "(not a chain call)"))
        print("\n".join(diffs))
    if args.npz:
        np.savez_compressed(args.npz, **_arrays(recorder.calls))
        print(f"wrote {args.npz} ({len(recorder.calls)} call(s); arrays call<N>_<field>)")
    return 0 if result.status in ("pass", "not_supported") else 1
