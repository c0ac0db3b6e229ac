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
import collections
import inspect
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
os.environ["TRITON_INTERPRET"] = "1"  # the interpreter: no GPU needed, and every launch passes through run()


def _key(function, args, kwargs) -> tuple:
    """The specialisation key of one launch of ``function`` (an ``InterpretedFunction``)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    signature = inspect.signature(function.fn)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    plain = set(function.kwargs.get("do_not_specialize") or ())
    unaligned = set(function.kwargs.get("do_not_specialize_on_alignment") or ())
    key = []
    for i, (name, value) in enumerate(bound.arguments.items()):
        annotation = signature.parameters[name].annotation
        if "constexpr" in str(annotation):
            key.append((name, value))
            continue
        specialise = name not in plain and i not in plain
        align = name not in unaligned and i not in unaligned
        key.append((name, native_specialize_impl(BaseBackend, value, False, specialise, align)[:2]))
    return tuple(key)


def count(calls: int, max_vocab: int, seed: int) -> dict[str, set]:
    """Distinct launch keys per kernel name over L1-long's first ``calls`` planned calls at ``V <= max_vocab``."""
    from triton.runtime.interpreter import InterpretedFunction

    from devices.registry import load
    from specsim.conformance.checks.chain import long_run as lr
    from specsim.conformance.core.calls import ask

    seen: dict[str, set] = collections.defaultdict(set)
    original = InterpretedFunction.run

    def recording(self, *args, grid, warmup, **kwargs):
        options = {k: v for k, v in kwargs.items() if k not in ("num_warps", "num_stages", "num_ctas")}
        seen[self.fn.__name__].add(_key(self, args, options))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = recording
    try:
        device = load("triton-interpret")
        plan = [p for p in lr.plan(device.capabilities, seed, 3000) if p.vocab_size <= max_vocab][:calls]
        for p in plan:
            batch, noise = lr.build(p)
            ask(device, batch, noise)
    finally:
        InterpretedFunction.run = original
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
