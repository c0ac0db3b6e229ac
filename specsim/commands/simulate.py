"""``specsim simulate``: run the simulated engine on a synthetic workload and print its metrics.

    specsim simulate --proposer eagle -k 4 --temperature 1.0          # vLLM's acceptance-metrics print format
    specsim simulate --json                                           # the same as JSON
    specsim simulate --sweep-temperature                              # acceptance length by temperature
    specsim simulate --bench                                          # emitted tokens/s, batch 64
"""

from __future__ import annotations

import sys

HELP = ("run the simulated engine on a synthetic workload; print its acceptance metrics (vLLM's format), a "
        "temperature sweep or a benchmark")

SWEEP_TEMPERATURES = (0.0, 0.3, 0.5, 0.7, 1.0, 1.3, 1.5, 2.0)  # the sweep's rows


def add_arguments(p):
    w = p.add_argument_group("workload")
    w.add_argument("--num-requests", type=int, default=64)
    w.add_argument("--prompt-len", type=int, default=16)
    w.add_argument("--output-len", type=int, default=64, help="max_tokens of every request")
    w.add_argument("--proposer", choices=("draft", "eagle", "ngram", "ptd", "universal", "none"), default="draft")
    w.add_argument("-k", "--num-speculative-tokens", type=int, default=4)
    w.add_argument("--temperature", type=float, default=1.0)
    w.add_argument("--top-k", type=int, default=0)
    w.add_argument("--top-p", type=float, default=1.0)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--vocab-size", type=int, default=64)
    w.add_argument("--order", type=int, default=2, help="context order of the toy models")
    w.add_argument("--closeness", type=float, default=0.7, help="drafter logits = c·target + (1−c)·independent")
    w.add_argument("--eos", action="store_true", help="token 0 is EOS")
    e = p.add_argument_group("engine")
    e.add_argument("--max-model-len", type=int, default=4096)
    e.add_argument("--block-size", type=int, default=16)
    e.add_argument("--num-blocks", type=int, default=4096, help="KV blocks (fewer forces preemption)")
    e.add_argument("--max-num-seqs", type=int, default=64)
    e.add_argument("--max-num-batched-tokens", type=int, default=8192)
    e.add_argument("--partial-drafts", action="store_true", help="verify fewer drafts when the budget is short")
    e.add_argument("--no-draft-probs", action="store_true", help="drafts without their probabilities (point proposals), as engines that drop them do")
    e.add_argument("--device", default="torch", help="device name or module:attr ('reference' for the reference)")
    e.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the metrics as JSON")
    o.add_argument("--sweep-temperature", action="store_true",
                   help="temperature 0..2: mean acceptance length without and with draft probs")
    o.add_argument("--bench", action="store_true", help="time the run: emitted tokens per second")
    o.add_argument("--repeat", type=int, default=5, help="--bench: timed runs (the median is reported)")


def _workload(args, **override):
    from specsim.engine.workload import Workload
    fields = dict(num_requests=args.num_requests, prompt_len=args.prompt_len, output_len=args.output_len,
                  proposer=args.proposer, k=args.num_speculative_tokens, temperature=args.temperature,
                  top_k=args.top_k, top_p=args.top_p, seed=args.seed, vocab_size=args.vocab_size,
                  order=args.order, closeness=args.closeness, eos=args.eos, max_model_len=args.max_model_len,
                  block_size=args.block_size, num_blocks=args.num_blocks, max_num_seqs=args.max_num_seqs,
                  max_num_batched_tokens=args.max_num_batched_tokens, partial_drafts=args.partial_drafts,
                  draft_probs=not args.no_draft_probs, device=args.device)
    fields.update(override)
    return Workload(**fields)


def _sweep(args) -> int:
    """Seed 003's table; with ``--json``, ``{"temperature_sweep": [{temperature, al_without_probs, al_with_probs}]}``
    (the shape ``specsim report`` reads)."""
    import json

    from specsim.engine.workload import build_engine
    rows = []
    if not args.json:
        print("| Temperature | AL w/o probs | AL w/ probs |")
        print("|---|---|---|")
    for t in SWEEP_TEMPERATURES:
        al = [build_engine(_workload(args, temperature=t, draft_probs=probs)) for probs in (False, True)]
        for engine in al:
            engine.run()
        rows.append({"temperature": t, "al_without_probs": al[0].metrics.mean_acceptance_length,
                     "al_with_probs": al[1].metrics.mean_acceptance_length})
        if not args.json:
            print(f"| {t:g} | {rows[-1]['al_without_probs']:.2f} | {rows[-1]['al_with_probs']:.2f} |")
    if args.json:
        print(json.dumps({"temperature_sweep": rows}))
    return 0


def _timed_run(w):
    """One timed run → (engine, wall seconds, seconds inside device.verify)."""
    import time

    from specsim.engine.workload import build_engine
    engine = build_engine(w)
    device_seconds = [0.0]
    verify = engine.device.verify

    def timed_verify(batch, noise=None):  # split the wall time: device vs the engine around it
        t = time.perf_counter()
        try:
            return verify(batch, noise)
        finally:
            device_seconds[0] += time.perf_counter() - t

    engine.device.verify = timed_verify
    start = time.perf_counter()
    try:
        engine.run()
    finally:
        del engine.device.verify
    return engine, time.perf_counter() - start, device_seconds[0]


def _bench(args) -> int:
    import torch

    from specsim.engine.workload import build_engine
    w = _workload(args)
    build_engine(_workload(args, num_requests=2, output_len=4)).run()  # warm up imports and the device
    runs = [_timed_run(w) for _ in range(args.repeat)]
    engine, _, _ = runs[0]
    m = engine.metrics
    rates = [m.emitted_tokens / seconds for _, seconds, _ in runs]
    median = sorted(range(len(runs)), key=lambda i: rates[i])[len(runs) // 2]
    _, seconds, device = runs[median]
    print("| device | proposer | V | K | T | requests | steps | emitted | AL | seconds | in device "
          "| tokens/s (median) | best | threads |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {w.device} | {w.proposer}{'' if w.draft_probs else ' (no probs)'} | {w.vocab_size} | {engine.k} | "
          f"{w.temperature:g} | {w.num_requests} | {engine.step_index} | {m.emitted_tokens} | "
          f"{m.mean_acceptance_length:.2f} | {seconds:.2f} | {device:.2f} | {rates[median]:,.0f} | "
          f"{max(rates):,.0f} | {torch.get_num_threads()} |")
    return 0


def run(args) -> int:
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    try:
        if args.sweep_temperature:
            return _sweep(args)
        if args.bench:
            return _bench(args)
        from specsim.engine.workload import build_engine
        engine = build_engine(_workload(args))
    except ValueError as e:
        print(f"specsim simulate: {e}", file=sys.stderr)
        return 2
    from devices.protocol import UnsupportedCall
    try:
        engine.run()
    except UnsupportedCall as e:  # the engine draws its own randomness: a device that cannot is no engine sampler
        print(f"specsim simulate: the device {args.device!r} refused the engine's step ({e}); the engine needs a "
              "device that draws its own randomness (Capabilities.rng 'philox' or 'seeded'), such as torch",
              file=sys.stderr)
        return 2
    print(engine.metrics.to_json() if args.json else engine.metrics.format())
    return 0
