"""``specsim bench``: time one verification step on a GPU against its floor, beside vLLM's sampler.

The benchmark is ``specsim.bench.step`` (its rows), timed as
``specsim.bench.harness`` times (CUDA events, warm-up, median, graph and eager),
on the inputs and floors of ``specsim.bench.workloads`` (bytes read, the
algorithmic and all-rows floors over the copy bandwidth measured in the same
run), with vLLM's sampler through ``specsim.bench.field``.

Example (the anchor)::

    specsim bench --batch 256 --k 4 --vocab 128256 --record docs/results/bench-h100.json

prints one line per row as it is measured, then the table: median ms, the
plain step's algorithmic floor (MB, ms, and the step's share of it: floor time /
median) and the all-rows floor's share, each row's time relative to vLLM's; then
the row's own floor (the plain floor plus its own inputs read once: a SPEC §12
row's bias, masks and records), its share of it, the bandwidth it achieved over
it, and its time relative to the same shape's ``triton graph``. With ``--sampler
all`` (or where the run measured one) the goals table follows: each goal's row,
met or not, and its floor and bandwidth as the bound. ``--record FILE`` writes
these tables (and ``--breakdown``'s kernels) as a record of
``specsim.figures.records``, which the docs render.

``--latency`` times B = 1, 8, 32, 256 (and the tree kernel at B = 8) instead,
each row against its measured floor (``specsim.bench.floors``: the launches it
makes, one pass over its bytes, its bytes), then the latency goals::

    specsim bench --latency --devices triton vllm vllm-v2 --record docs/results/bench-h200-latency.json
"""

from __future__ import annotations

from dataclasses import fields

HELP = "time a verification step on a GPU vs. its bandwidth floors and vLLM's sampler (needs CUDA)"


def add_arguments(p):
    from specsim.bench.step import DEVICES, DTYPES, MODES
    p.add_argument("--devices", nargs="+", default=list(DEVICES), choices=DEVICES,
                   help="what to time (default: all; vllm, vllm-v2 (Model Runner V2) and flashinfer only where "
                        "they load, the table's note says why not)")
    p.add_argument("--batch", type=int, nargs="+", default=[256])
    p.add_argument("--k", type=int, nargs="+", default=[4])
    p.add_argument("--vocab", type=int, nargs="+", default=[128256])
    p.add_argument("--dtype", default="float32", choices=DTYPES,
                   help="target logits' dtype (16-bit logits go with float32 draft probabilities)")
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES,
                   help="draft: full rejection with draft probs; point: no draft probs; greedy: T = 0")
    p.add_argument("--reps", type=int, default=50, help="timed calls (median reported)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-graph", action="store_true", help="skip the 'triton graph' row")
    p.add_argument("--no-launches", action="store_true", help="skip the 'triton launches' row")
    p.add_argument("--device-time", action="store_true",
                   help="also time each row on the device alone, queued behind a sleeping kernel so that its "
                        "submission from the host is hidden (its 'device_ms'; --latency does so always)")
    p.add_argument("--host-load", type=int, default=0, metavar="N",
                   help="keep N processes spinning on the host's CPUs while the rows are timed, as an engine's "
                        "scheduler and tokenizers keep its host busy (the tables' note says so); default 0")
    p.add_argument("--breakdown", action="store_true", help="also profile the Triton kernels (device time each)")
    p.add_argument("--block", type=int, default=None, help="Triton vocabulary tile (default: KernelConfig)")
    p.add_argument("--warps", type=int, default=None, help="Triton num_warps")
    p.add_argument("--programs", type=int, default=None, help="Triton programs per pass")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="also write the printed tables as a record for the docs (specsim.figures.records), "
                        "e.g. docs/results/bench-h100.json")
    p.add_argument("--sampler", choices=["off", "all"], default="off",
                   help="all: also time SPEC §12 with every parameter on (rows 'triton filters' (the cut and the step "
                        "a CUDA graph), 'triton filters eager' (TritonStep with its filters), 'triton filters launches', "
                        "'triton filters torch.topk', 'triton §12' (fused), "
                        "'triton §12 unfused', 'triton §12+filters' (fused: the cut of the §12 rows, never written; "
                        "the step a CUDA graph), 'triton §12+filters eager', 'triton §12+filters processed', 'vllm filters', 'vllm §12 (served)': vLLM "
                        "with the parameters it serves with spec decode, no mask, bias or min_p; 'vllm v2 filters', "
                        "'flashinfer filters'; draft and point modes; see specsim.bench.workloads.sampler_params), "
                        "then the goals table (specsim.bench.step.GOALS)")
    runs = p.add_mutually_exclusive_group()
    runs.add_argument("--goals", action="store_true",
                      help="measure every goal in one run (specsim.bench.step.GOAL_RUNS): the anchor 256 x 4 x "
                           "128256 with --sampler all for the devices asked, bfloat16 logits and point proposals at "
                           "V = 32000 on triton, and the tree kernel (64 requests, 64 nodes of depth 6); --batch, "
                           "--k, --vocab, --dtype, --modes and --sampler are set by it")
    runs.add_argument("--latency", action="store_true",
                      help="the small batches of real decoding in one run (specsim.bench.step.LATENCY_RUN): "
                           "B = 1, 8, 32, 256 at K = 4, V = 128256, float32, draft and point, triton graph and "
                           "eager beside vllm and vllm-v2 where they load, and the tree kernel at B = 8; each "
                           "row against its measured floor (launches, one pass over its bytes, its bytes: "
                           "specsim.bench.floors), then the latency goals; --batch, --k, --vocab, --dtype, "
                           "--modes and --sampler are set by it")
    runs.add_argument("--tune", action="store_true",
                      help="choose the Triton device's launch shapes for this GPU by a sweep (specsim.bench.tune: "
                           "programs per batch size at B = 1, 32, 256; statistics tile, warps and stages; step "
                           "tile and warps for draft and point; the 16-bit tile; each candidate timed on the "
                           "device alone), print every candidate's time and the winners; "
                           "with --tune-out FILE, add them to a tuning file under this GPU's name")
    p.add_argument("--tune-out", default=None, metavar="FILE",
                   help="with --tune: the tuning file to add this GPU's entry to (SPECSIM_TRITON_TUNING=FILE "
                        "makes the Triton device use it; devices/triton_tuning.json holds the shipped ones)")


def run(args) -> int:
    if args.tune_out and not args.tune:
        print("specsim bench: --tune-out FILE goes with --tune")
        return 2
    if args.host_load < 0:
        print(f"specsim bench: --host-load must be 0 or more processes, got {args.host_load}")
        return 2
    try:
        import torch
    except ImportError:
        print("specsim bench: needs torch with CUDA")
        return 2
    if not torch.cuda.is_available():
        if args.latency:
            print("specsim bench --latency: no CUDA GPU here; its rows and floors (CUDA graphs of launches and "
                  "reads) are measured on a GPU and have nothing to measure on CPU")
            return 2
        print("specsim bench: no CUDA GPU here; the benchmark times GPU kernels and has nothing to measure on CPU")
        return 2
    if args.tune:
        return tune(torch, args)
    from specsim.bench import step
    opts = step.Options(**{f.name: getattr(args, f.name) for f in fields(step.Options)})
    measure = step.measure_goals if args.goals else step.measure_latency if args.latency else step.measure
    result = measure(torch, opts)
    print()
    print("\n".join(step.table_lines(step.HEADER, [step.cells(r) for r in result.rows])))
    if result.kernels:
        print()
        print("\n".join(step.table_lines(step.KERNEL_HEADER, [step.kernel_cells(k) for k in result.kernels])))
    if step.shows_goals(result):
        print()
        print("\n".join(step.table_lines(step.GOALS_HEADER, step.goal_rows(result))))
    if result.latency:
        print()
        print("\n".join(step.table_lines(step.LATENCY_HEADER, step.latency_table(result))))
        print()
        print("\n".join(step.table_lines(step.GOALS_HEADER, step.latency_goal_rows(result))))
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump(step.to_json(result), f, indent=1)
    if args.record:
        from specsim.figures import records
        records.write(step.record(result, records.command_line()), args.record)
        print(f"wrote {args.record}")
    return 0


def tune(torch, args) -> int:
    """``--tune``: the sweep, its table, the tuned entry (and ``--tune-out``, ``--record``)."""
    import json
    import pathlib

    from specsim.bench import harness, tune as tuning
    from specsim.bench.step import launch_text, table_lines
    name, result, entry = tuning.run(torch, args.reps, args.warmup)
    print()
    print("\n".join(table_lines(tuning.TRIALS_HEADER, [tuning.trial_cells(t) for t in result.trials])))
    print()
    for key, config in result.configs.items():
        print(f"tuned {key}: {launch_text(config)}")
    print(json.dumps({name: entry}, indent=1))
    if args.tune_out:
        from devices.triton_tuning import write_entry
        write_entry(pathlib.Path(args.tune_out), name, entry)
        print(f"wrote {name}'s entry to {args.tune_out} (use it: SPECSIM_TRITON_TUNING={args.tune_out})")
    if args.record:
        from specsim.figures import records
        hardware, versions = harness.environment(torch)
        records.write(tuning.record(name, result, entry, records.command_line(), hardware, versions), args.record)
        print(f"wrote {args.record}")
    return 0
