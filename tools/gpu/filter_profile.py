"""Where the Triton device's top-k/top-p step goes: torch.profiler over the bench's
'triton filters' row, per variant — the kernels' device time each, what they add up to, and the
wall time a call (events around it): the gap between the two is host work and syncs.

    python tools/gpu/filter_profile.py [--batch 256 --k 4 --vocab 128256] [--reps 20] [--record FILE] [--host]

``--record FILE`` writes what it printed as a record (``specsim.figures.records``; GPU, torch, Triton,
CUDA and driver versions): table ``variants`` (a row a variant: wall time a call, kernels' device time,
gaps, syncs a call, requests differing from the whole-row float64 step) and table ``kernels`` (the
graph variant's kernels, longest first). docs/triton-device.md shows them from
``docs/results/triton-filters.json``.

``--host``: instead, where the host time of an eager call goes: cProfile over ``--reps`` calls of
the ``cut triton`` variant (the host's own time per function, longest first), beside the host time a
call with the GPU never waited on (the calls are queued without a sync in between).

Variants: ``copy`` (a code base whose ``devices.triton_device`` has no ``filter_cuts``: the
filtered copy of the rows, ``filter_logits``, then the plain step — run this file from such a
checkout to profile it), ``cut torch.topk`` and ``cut triton`` (``filter_cuts``: the kernels read
each row through its cut; the candidates by ``torch.topk`` or ``devices/triton_topk.py``).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())  # run from the repo root: its devices/ and specsim/


def variants(td, kernel_module):
    """``{label: filtered_step(x, cu, temperature, top_k, top_p)}`` for this checkout's code."""
    def plain(x, logits, **kw):
        return td.verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], logits, x["temperature"],
                                 max_k=x["max_k"], seeds=x["seeds"], positions=x["positions"], **kw)

    if not hasattr(td, "filter_cuts"):
        return {"copy": lambda x, *a: plain(x, td.filter_logits(x["target_logits"], *a))}
    from devices.filter_cut import torch_top_values
    from devices.filter_graph import FilterCuts
    triton_values = td.triton_top_values(kernel_module("devices.triton_topk", False), td.KernelConfig())
    cuts = {name: (lambda *a, tv=tv: td.filter_cuts(*a, top_values=tv))
            for name, tv in (("torch.topk", torch_top_values), ("triton", triton_values))}
    cuts["triton graph"] = FilterCuts(triton_values)
    return {f"cut {name}": (lambda x, *a, f=f: plain(x, x["target_logits"], cut=f(x["target_logits"], *a)))
            for name, f in cuts.items()}


def whole_row_step(torch, td, x, top_k, top_p):
    """The step on a copy filtered by the whole-row float64 decisions (``filter_cut.whole_row_kept``:
    a float64 sort of every row, no candidates, no cut): the tokens every variant must give."""
    from devices.filter_cut import whole_row_kept
    from devices.torch_sampling import SamplingRows
    rows = x["target_logits"].shape[0]
    per_row = lambda a: torch.as_tensor(np.repeat(a, x["max_k"] + 1)[:rows], device="cuda")  # noqa: E731
    params = SamplingRows(per_row(x["temperature"].cpu().numpy()), per_row(top_k.astype(np.int64)),
                          per_row(top_p.astype(np.float64)))
    kept = whole_row_kept(x["target_logits"], params)
    filtered = x["target_logits"].masked_fill(~kept, float("-inf"))
    del kept
    return td.verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], filtered, x["temperature"],
                             max_k=x["max_k"], seeds=x["seeds"], positions=x["positions"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--top", type=int, default=12, help="kernels listed per variant")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="write the figures as a record (specsim.figures.records), e.g. docs/results/triton-filters.json")
    p.add_argument("--host", action="store_true", help="profile the eager call's host work instead (cProfile)")
    args = p.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    from devices import triton_device as td
    from devices.triton_mode import kernel_module
    from specsim.bench.harness import median, time_calls
    from specsim.bench.workloads import FILTERS, make_inputs

    B, K, V = args.batch, args.k, args.vocab
    sets = [make_inputs(torch, B, K, V, torch.float32, "draft", seed) for seed in range(2)]
    cu = sets[0]["cu"].cpu().numpy()
    temperature = sets[0]["temperature"].cpu().numpy()
    top_k, top_p = np.full(B, FILTERS["top_k"]), np.full(B, FILTERS["top_p"])
    if args.host:
        return host_profile(torch, variants(td, kernel_module)["cut triton"], sets, cu, temperature, top_k, top_p,
                            args.reps, args.top)
    want = whole_row_step(torch, td, sets[0], top_k, top_p) if hasattr(td, "filter_cuts") else None
    profiles = []
    for label, fn in variants(td, kernel_module).items():
        call = lambda i, fn=fn: fn(sets[i % len(sets)], cu, temperature, top_k, top_p)  # noqa: E731
        differ = None
        if want is not None:  # three calls on set 0: a graph's eager call, its capture, a replay
            differ = [int(((o != want[0]).any(1) | (a != want[1])).sum()) for o, a in (call(0), call(2), call(4))]
            print(f"{label}: {differ} of {B} requests differ from the step on the whole-row float64 filtered "
                  f"copy (calls 1, 2, 3)")
        wall = median(time_calls(torch, call, args.reps, warmup=5))  # a graph per set: eager, capture
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(args.reps):
                call(i)
            torch.cuda.synchronize()
        events = prof.key_averages()
        kernels = sorted(((e.key, getattr(e, "device_time_total", 0) / args.reps) for e in events
                          if getattr(e, "device_time_total", 0) > 0 and e.device_type.name == "CUDA"),
                         key=lambda kv: -kv[1])
        syncs = {e.key: e.count // args.reps for e in events
                 if e.key in ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaMemcpyAsync")}
        busy = sum(t for _, t in kernels)
        print(f"\n== {label}: wall {wall * 1e3:.3f} ms a call (median of {args.reps}), kernels {busy / 1e3:.3f} "
              f"device ms, so {wall * 1e3 - busy / 1e3:.3f} ms of gaps (host work, syncs); per call {syncs}")
        for name, t in kernels[:args.top]:
            print(f"  {t / 1e3:8.3f} ms  {name[:110]}")
        profiles.append({"label": label, "wall_ms": wall * 1e3, "busy_ms": busy / 1e3, "syncs": syncs,
                         "differ": differ, "kernels": [(name, t / 1e3) for name, t in kernels[:args.top]]})
    if args.record:
        write_record(args, profiles)
    return 0


def host_profile(torch, fn, sets, cu, temperature, top_k, top_p, reps: int, top: int) -> int:
    """Print the host time a call (queued calls, one sync at the end) and cProfile's functions by their own time."""
    import cProfile
    import pstats
    import time
    call = lambda i: fn(sets[i % len(sets)], cu, temperature, top_k, top_p)  # noqa: E731
    for i in range(5):
        call(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(reps):
        call(i)
    host = (time.perf_counter() - t0) / reps
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / reps
    print(f"host {host * 1e3:.3f} ms a call queued, wall {wall * 1e3:.3f} ms a call ({reps} calls)")
    prof = cProfile.Profile()
    prof.enable()
    for i in range(reps):
        call(i)
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)
    pstats.Stats(prof).sort_stats("cumtime").print_stats(top)
    return 0


def write_record(args, profiles: list[dict]) -> None:
    """The printed figures as a record: a row a variant, and the kernels of the last (the graph, where the
    checkout has one)."""
    from gpu_record import gpu_record

    from specsim.figures import records
    record = gpu_record("tools/gpu/filter_profile.py")
    shape = f"{args.batch} × {args.k} × {args.vocab}"
    record["tables"]["variants"] = {
        "columns": ["variant", "wall ms a call", "kernels, device ms", "gaps ms", "syncs a call",
                    f"requests differing (of {args.batch}; calls 1, 2, 3)"],
        "rows": [[p["label"], f"{p['wall_ms']:.3f}", f"{p['busy_ms']:.3f}", f"{p['wall_ms'] - p['busy_ms']:.3f}",
                  str(sum(p["syncs"].values())), "-" if p["differ"] is None else ", ".join(map(str, p["differ"]))]
                 for p in profiles],
        "note": f"{shape}, float32, draft probabilities, top-k/top-p on every request; median of {args.reps} calls; "
                "gaps: wall minus the kernels' device time (host work, syncs)."}
    last = profiles[-1]
    record["tables"]["kernels"] = {"columns": ["kernel", "device ms a call"],
                                   "rows": [[f"`{name[:80]}`", f"{ms:.3f}"] for name, ms in last["kernels"]],
                                   "note": f"The kernels of '{last['label']}', longest first."}
    for p in profiles:
        key = p["label"].replace(" ", "-").replace(".", "")
        record["values"][f"{key}-wall-ms"] = f"{p['wall_ms']:.3f}"
        record["values"][f"{key}-device-ms"] = f"{p['busy_ms']:.3f}"
    records.write(record, args.record)
    print(f"wrote {args.record}")


if __name__ == "__main__":
    sys.exit(main())
