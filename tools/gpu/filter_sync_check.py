"""The Triton device's filtered step with no host sync: eager against its CUDA graph, each run once
more under ``torch.cuda.set_sync_debug_mode("error")``, each cut held to the whole-row float64 one.

    python tools/gpu/filter_sync_check.py [--batch 256 --k 4 --vocab 128256] [--dtype float32]
                                          [--min-p] [--reps 50] [--record FILE]

Variants (top-k 50 / top-p 0.9 on every request, as ``specsim bench``'s filter row; ``--min-p``
adds its min_p in the vllm order): ``eager`` (``filter_cuts``, the candidates by
``devices/triton_topk.py``), ``graph`` (``devices.filter_graph.FilterCuts``: a CUDA graph of the
cut's device work) and ``eager torch.topk``, each the cut and then the step read through it. For
each: the median time a call (CUDA events around each call, no sync between calls, so a host
that waits on the GPU shows), whether one call under sync debug mode "error" ran (a host sync
raises there), and the rows whose kept set differs from ``filter_cut.whole_row_kept``'s.
``--dtype bfloat16`` gives rows whose k-th value recurs past the candidates (the tied rows).
Exit status 1 when a variant syncs or keeps other tokens than the whole row does.

``--record FILE`` writes the table as a record (``specsim.figures.records``; GPU and versions).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())  # run from the repo root: its devices/ and specsim/


def variants(td, kernel_module):
    """``{label: cut(logits, cu, temperature, top_k, top_p, min_p, order)}``."""
    from devices.filter_cut import torch_top_values
    from devices.filter_graph import FilterCuts
    triton_values = td.triton_top_values(kernel_module("devices.triton_topk", False), td.KernelConfig())
    return {"eager": lambda *a: td.filter_cuts(*a, top_values=triton_values),
            "graph": FilterCuts(triton_values),
            "eager torch.topk": lambda *a: td.filter_cuts(*a, top_values=torch_top_values)}


def rows_differing(torch, x, cut, args) -> int:
    """Rows whose ``z ≥ cut`` differs from ``filter_cut.whole_row_kept`` (a float64 sort of every row)."""
    from devices.filter_cut import whole_row_kept
    from devices.torch_sampling import SamplingRows
    _, temperature, top_k, top_p, min_p, order = args
    per_row = lambda a, dt: torch.as_tensor(np.repeat(np.asarray(a, dt), x["max_k"] + 1),  # noqa: E731
                                            device="cuda")
    logits = x["target_logits"]
    params = SamplingRows(per_row(temperature, np.float64), per_row(top_k, np.int64), per_row(top_p, np.float64),
                          None if min_p is None else per_row(min_p, np.float64))
    differ = 0
    for lo in range(0, logits.shape[0], 128):  # slices: the float64 sort of every row at once is large
        z = logits[lo:lo + 128]
        want = whole_row_kept(z, params._replace(**{f: getattr(params, f)[lo:lo + 128] for f in params._fields
                                                     if getattr(params, f) is not None}), order)
        got = z.to(cut.dtype) >= cut[lo:lo + 128].unsqueeze(1)
        differ += int((got != want).any(dim=1).sum())
    return differ


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "float64"])
    p.add_argument("--min-p", action="store_true", help="add specsim bench's min_p, in the vllm order")
    p.add_argument("--reps", type=int, default=50)
    p.add_argument("--record", default=None, metavar="FILE", help="write the table as a record")
    args = p.parse_args(argv)
    import torch

    from devices import triton_device as td
    from devices.triton_mode import kernel_module
    from specsim.bench.harness import median, time_calls
    from specsim.bench.workloads import FILTERS, make_inputs

    B, K, V = args.batch, args.k, args.vocab
    sets = [make_inputs(torch, B, K, V, getattr(torch, args.dtype), "draft", seed) for seed in range(2)]
    cu = sets[0]["cu"].cpu().numpy()
    temperature = sets[0]["temperature"].cpu().numpy()
    top_k, top_p = np.full(B, FILTERS["top_k"]), np.full(B, FILTERS["top_p"])
    min_p = np.full(B, FILTERS["min_p"]) if args.min_p else None
    order = "vllm" if args.min_p else "canonical"
    cut_args = (cu, temperature, top_k, top_p, min_p, order)

    def step(x, cut):
        return td.verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"],
                                 x["temperature"], max_k=K, seeds=x["seeds"], positions=x["positions"], cut=cut)

    rows, failed = [], False
    for label, cuts in variants(td, kernel_module).items():
        call = lambda i, cuts=cuts: step(sets[i % 2], cuts(sets[i % 2]["target_logits"], *cut_args))  # noqa: E731
        for i in range(6):  # compile; a graph per set: eager, capture, then replays
            call(i)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            call(0)
            torch.cuda.set_sync_debug_mode(0)
            torch.cuda.synchronize()
            synced = "none"
        except RuntimeError as e:
            torch.cuda.set_sync_debug_mode(0)
            synced = str(e).splitlines()[0][:100]
            failed = True
        wall = median(time_calls(torch, call, args.reps, warmup=2))
        differ = rows_differing(torch, sets[0], cuts(sets[0]["target_logits"], *cut_args).floor.clone(), cut_args)
        failed |= differ > 0
        rows.append([label, f"{wall * 1e3:.3f}", synced, str(differ)])
        print(f"{label}: {wall * 1e3:.3f} ms a call (median of {args.reps}), sync under debug mode 'error': "
              f"{synced}; rows keeping other tokens than the whole-row float64 cut: {differ} of "
              f"{sets[0]['target_logits'].shape[0]}")
    if args.record:
        from gpu_record import gpu_record

        from specsim.figures import records
        record = gpu_record("tools/gpu/filter_sync_check.py")
        record["tables"]["variants"] = {
            "columns": ["variant", "ms a call (cut + step)", "host sync (debug mode 'error')",
                        "rows differing from the whole-row cut"],
            "rows": rows,
            "note": f"{B} × {K} × {V}, {args.dtype}, draft probabilities, top-k {FILTERS['top_k']} / top-p "
                    f"{FILTERS['top_p']}" + (f" / min_p {FILTERS['min_p']} (vllm order)" if args.min_p else "")
                    + f" on every request; median of {args.reps} calls."}
        for label, wall, _, _ in rows:
            record["values"][f"{label.replace(' ', '-').replace('.', '')}-ms"] = wall
        records.write(record, args.record)
        print(f"wrote {args.record}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
