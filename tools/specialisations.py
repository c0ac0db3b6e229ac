"""How many compiled variants of each Triton kernel a sequence of calls asks for, counted on the CPU.

    python tools/specialisations.py [--calls 400] [--max-vocab 4096] [--seed 0]

A compiled Triton kernel is specialised on its constexpr arguments and, for every other argument, on what
Triton's launcher reads off it at each launch: an integer's value being 1 or a multiple of 16, a pointer's
address being a multiple of 16. Each new combination is a compilation (about a second on the GPU's host).
This runs L1-long's planned calls (those at ``V <= --max-vocab``) on the Triton device in the interpreter,
computes at every launch the key the compiled launcher would compute (Triton's own ``native_specialize_impl``)
and prints the distinct keys per kernel: the compilations a fresh GPU process would pay for those calls.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
os.environ["TRITON_INTERPRET"] = "1"  # the interpreter: no GPU needed, and every launch passes through run()


def count(calls: int, max_vocab: int, seed: int) -> dict[str, set]:
    """Distinct launch keys per kernel name over L1-long's first ``calls`` planned calls at ``V <= max_vocab``."""
    from devices.registry import load
    from devices.triton_mode import recorded_launches
    from specsim.conformance.checks.chain import long_run as lr
    from specsim.conformance.core.calls import ask

    device = load("triton-interpret")
    plan = [p for p in lr.plan(device.capabilities, seed, 3000) if p.vocab_size <= max_vocab][:calls]
    with recorded_launches() as seen:
        for p in plan:
            batch, noise = lr.build(p)
            ask(device, batch, noise)
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--max-vocab", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    seen = count(args.calls, args.max_vocab, args.seed)
    for name, keys in sorted(seen.items(), key=lambda kv: -len(kv[1])):
        print(f"{name:>20} {len(keys):>5}")
    print(f"{'all kernels':>20} {sum(len(k) for k in seen.values()):>5}")


if __name__ == "__main__":
    main()
