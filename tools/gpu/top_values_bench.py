"""Top-k candidates on a GPU: ``devices/triton_topk.py``'s one-read and two-read paths and
``torch.topk``, exact against ``torch.topk`` on random, tied and adversarial rows, then timed.

    python tools/gpu/top_values_bench.py [--rows 1280 --vocab 128256 --k 50] [--reps 30]

Prints two tables: ``exact`` (a row a case: rows flagged for the whole-row redo, rows differing
from ``torch.topk``) and ``time`` (a row a variant and launch shape: median device time a call by
CUDA events, and the bandwidth of one read of the rows). A variant differing anywhere exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.getcwd())  # run from the repo root: its devices/ and specsim/


def cases(torch, rows: int, vocab: int, dtype):
    """``{name: logits [rows, vocab]}`` on the GPU: the shapes a lane's four slots meet."""
    g = torch.Generator(device="cuda").manual_seed(0)
    z = torch.randn(rows, vocab, device="cuda", generator=g) * 3
    out = {"random": z.to(dtype)}
    out["bfloat16 grid (ties)"] = z.to(torch.bfloat16).to(dtype)
    strided = z.clone()
    strided[:, ::2048] += 100.0  # the top entries all in one lane of every chunk
    out["stride 2048 (flagged)"] = strided.to(dtype)
    sparse = torch.full_like(z, float("-inf"))
    sparse[:, :20] = z[:, :20]  # fewer finite entries than k + 1
    out["20 finite"] = sparse.to(dtype)
    out["constant"] = torch.zeros_like(z).to(dtype)
    return out


def time_ms(torch, fn, reps: int) -> float:
    """Median ms a call of ``fn()`` (``specsim.bench.harness.time_calls``: CUDA events, one warm-up)."""
    from specsim.bench.harness import median, time_calls
    return 1e3 * median(time_calls(torch, lambda i: fn(), reps, 1))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1280)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--k", type=int, default=50)
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args(argv)
    import torch

    from devices.filter_cut import torch_top_values
    from devices.triton_mode import kernel_module
    topk = kernel_module("devices.triton_topk", False)
    ks = torch.full((args.rows,), args.k, dtype=torch.int64, device="cuda")
    width = args.k + 1
    variants = {"one read": lambda z: topk.sweep_values(topk, z, None, ks, width),
                "two reads": lambda z: topk.two_pass_values(topk, z, None, ks, width),
                "torch.topk": lambda z: torch_top_values(z, None, ks, width)}
    bad = 0
    print(f"exact: {args.rows} x {args.vocab}, k = {args.k}")
    print("| dtype | case | variant | rows differing | ties differing |\n|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        for name, z in cases(torch, args.rows, args.vocab, dtype).items():
            want, want_ties = torch_top_values(z.float(), None, ks, width)
            for label, fn in variants.items():
                got, ties = fn(z)
                differ = int((got[:, :width] != want).any(1).sum())
                tdiff = int((ties != want_ties).sum())
                bad += differ + tdiff
                print(f"| {str(dtype)[6:]} | {name} | {label} | {differ} | {tdiff} |")
            del z
    print("\ntime (median of", args.reps, "calls)")
    print("| dtype | variant | shape | ms | GB/s (one read) |\n|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        z = cases(torch, args.rows, args.vocab, dtype)["random"]
        nbytes = z.numel() * z.element_size()
        shapes = {"one read": [dict(), dict(num_warps=8), dict(programs=4224), dict(select_warps=8),
                               dict(lanes=1024), dict(lanes=4096)],
                  "two reads": [dict()], "torch.topk": [dict()]}
        for label, shape_list in shapes.items():
            for kw in shape_list:
                if label == "one read":
                    fn = lambda kw=kw: topk.sweep_values(topk, z, None, ks, width, **kw)  # noqa: E731
                elif label == "two reads":
                    fn = lambda: topk.two_pass_values(topk, z, None, ks, width)  # noqa: E731
                else:
                    fn = lambda: torch_top_values(z, None, ks, width)  # noqa: E731
                ms = time_ms(torch, fn, args.reps)
                print(f"| {str(dtype)[6:]} | {label} | {kw or 'default'} | {ms:.3f} | {nbytes / ms / 1e6:.0f} |")
        if dtype == torch.float32:  # the one-read kernels alone, at the default launch shape
            G = topk.LANES
            top = torch.empty(args.rows, 4 * G, device="cuda")
            out = torch.empty(args.rows, width, device="cuda")
            ties = torch.empty(args.rows, dtype=torch.int64, device="cuda")
            flags = torch.empty(2, args.rows, dtype=torch.int32, device="cuda")
            buf = 1 << (2 * width - 1).bit_length()
            scratch = torch.empty(args.rows, buf, device="cuda")
            chunk = -(-args.vocab // G) * (G // 2)
            sweep = lambda: topk.lane_top_kernel[(args.rows, 2)](z, z, top, args.vocab, chunk, G,  # noqa: E731
                                                                  TILES=chunk // (G // 2), BLOCK=G // 2,
                                                                  ALL_ROWS=True, FP64=False, num_warps=4)
            select = lambda: topk.select_kernel[(args.rows,)](top, ks, flags[0], out, ties, scratch, flags[1],  # noqa: E731
                                                               width, G=G, BUF=buf, FP64=False, num_warps=4)
            for label, fn in (("lane_top_kernel", sweep), ("select_kernel", select)):
                print(f"| float32 | {label} | alone | {time_ms(torch, fn, args.reps):.3f} | |")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
