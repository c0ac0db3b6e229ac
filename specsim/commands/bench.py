"""``specsim bench``: time one verification step on a GPU against the bandwidth floor.

The floor is the bytes a step cannot avoid — every target logit and every
draft probability read once — over the device-to-device copy bandwidth
measured in the same run (bytes read + written). Each device runs the same
inputs: random logits, never-zero random draft probabilities (a softmax),
random drafts, keyed Philox noise (SPEC §5.2). Method (device tool's
METHOD.md): CUDA events, warm-up, median of many, and enough input sets
rotated that each call reads memory, not L2.

Example (the anchor: vLLM 0.33's sampler takes 1.34 ms here on an H100)::

    specsim bench --device triton --batch 256 --k 4 --vocab 128256

prints, per device and mode, the median time, bytes of the floor, achieved
GB/s (floor bytes / time) and that as a percent of the copy bandwidth. The
Triton step is timed twice: replaying a CUDA graph of it ("triton graph",
kernels only, as an engine that graphs its step runs it) and eagerly from
Python ("triton", which adds the launch overhead of four Triton launches and
a few torch ops, and is host-bound when the GPU work is under ~1 ms). The
torch device synchronises once per call, so it is timed eagerly only.
"""

from __future__ import annotations

HELP = "time a verification step on a GPU vs. the bandwidth floor (needs CUDA)"


def add_arguments(p):
    p.add_argument("--device", default="triton", choices=["triton", "torch", "both"],
                   help="device to time; 'triton' also times the torch device for comparison unless --only")
    p.add_argument("--only", action="store_true", help="time just --device, not the torch comparison")
    p.add_argument("--batch", type=int, nargs="+", default=[256])
    p.add_argument("--k", type=int, nargs="+", default=[4])
    p.add_argument("--vocab", type=int, nargs="+", default=[128256])
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--modes", nargs="+", default=["draft", "point", "greedy"], choices=["draft", "point", "greedy"],
                   help="draft: full rejection with draft probs; point: no draft probs; greedy: T = 0")
    p.add_argument("--reps", type=int, default=50, help="timed calls (median reported)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-graph", action="store_true",
                   help="skip the CUDA-graph timing of the Triton step (eager timing is always shown)")
    p.add_argument("--breakdown", action="store_true", help="also profile the Triton device's kernels (device time each)")
    p.add_argument("--block", type=int, default=None, help="Triton vocabulary tile (default: KernelConfig)")
    p.add_argument("--warps", type=int, default=None, help="Triton num_warps")
    p.add_argument("--programs", type=int, default=None, help="Triton programs per pass")


def copy_bandwidth(torch, nbytes: int = 2 << 30, reps: int = 20) -> float:
    """Device-to-device copy, bytes read + written per second (median of ``reps``)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    times = _time(torch, lambda i: dst.copy_(src), reps, warmup=3)
    del src, dst
    return 2 * nbytes / _median(times)


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def _time(torch, fn, reps: int, warmup: int) -> list[float]:
    """Seconds per call of ``fn(i)``, each call timed by its own CUDA events."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (start, end) in enumerate(events):
        start.record()
        fn(warmup + i)
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in events]


def make_inputs(torch, batch: int, k: int, vocab: int, dtype, mode: str, seed: int) -> dict:
    """One input set on the GPU: ``target_logits`` ``[batch·(k+1), V]``, ``draft_probs``
    ``[batch·k, V]`` (softmax of normals: never zero) or None, drafts, keyed noise."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = batch * k
    logits = torch.randn(n + batch, vocab, device="cuda", dtype=dtype, generator=g) * 2
    draft = torch.softmax(torch.randn(n, vocab, device="cuda", dtype=dtype, generator=g) * 2, dim=1) \
        if mode == "draft" else None
    temperature = torch.full((batch,), 0.0 if mode == "greedy" else 1.0, device="cuda", dtype=torch.float64)
    return dict(num_draft_tokens=torch.full((batch,), k, device="cuda", dtype=torch.int64),
                cu=torch.arange(batch + 1, device="cuda", dtype=torch.int64) * k,
                draft_token_ids=torch.randint(0, vocab, (n,), device="cuda", generator=g),
                draft_probs=draft, target_logits=logits, temperature=temperature,
                seeds=torch.randint(-2**62, 2**62, (batch,), device="cuda", generator=g),
                positions=torch.randint(0, 2**20, (batch,), device="cuda", generator=g), max_k=k)


def floor_bytes(batch: int, k: int, vocab: int, itemsize: int, mode: str) -> int:
    """Target logits read once, plus draft probabilities read once in ``draft`` mode."""
    rows = batch * (k + 1) + (batch * k if mode == "draft" else 0)
    return rows * vocab * itemsize


def _callers(torch, name: str, config):
    """``name`` → function(inputs) running one step with keyed noise."""
    if name == "triton":
        from devices.triton_device import verify_tensors as triton_verify

        def call(x):
            return triton_verify(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"],
                                 x["temperature"].to(x["target_logits"].dtype), max_k=x["max_k"], seeds=x["seeds"],
                                 positions=x["positions"], config=config)
        return call
    from devices.torch_device import verify_tensors as torch_verify
    zeros = {}

    def call(x):
        b = x["temperature"].shape[0]
        if b not in zeros:
            zeros[b] = (torch.zeros(b, device="cuda", dtype=torch.int64), torch.ones(b, device="cuda",
                                                                                       dtype=torch.float64))
        top_k, top_p = zeros[b]
        return torch_verify(x["num_draft_tokens"], x["draft_token_ids"], x["draft_probs"], x["target_logits"],
                            x["temperature"], top_k, top_p, seeds=x["seeds"], positions=x["positions"],
                            max_k=x["max_k"])
    return call


def _graphs(torch, call, sets) -> list:
    """One CUDA graph per input set (the step has no host sync, so it captures whole):
    replays time the kernels without Python's launch overhead, as an engine runs them."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x in sets:
            call(x)  # compile and warm outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graphs = []
    for x in sets:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call(x)
        graphs.append(g)
    return graphs


def kernel_times(torch, call, sets, reps: int = 20) -> dict[str, float]:
    """Device seconds per call of each kernel (torch.profiler), calls issued back to back
    as in the timed loop; torch's small glue kernels are summed under ``"other"``."""
    from torch.profiler import ProfilerActivity, profile

    for i in range(3):
        call(sets[i % len(sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            call(sets[i % len(sets)])
        torch.cuda.synchronize()
    times = {e.key: getattr(e, "device_time_total", 0) * 1e-6 / reps for e in prof.key_averages()}
    ours = {k: v for k, v in times.items() if k in ("row_stats_kernel", "accept_kernel", "race_kernel",
                                                     "finalize_kernel")}
    ours["other"] = sum(times.values()) - sum(ours.values())
    return ours


def run(args) -> int:
    try:
        import torch
    except ImportError:
        print("specsim bench: needs torch with CUDA")
        return 2
    if not torch.cuda.is_available():
        print("specsim bench: no CUDA GPU here; the benchmark times GPU kernels and has nothing to measure on CPU")
        return 2
    from devices.triton_device import KernelConfig

    base = KernelConfig()
    config = KernelConfig(block=args.block or base.block, num_warps=args.warps or base.num_warps,
                          programs=args.programs or base.programs)
    names = ["triton", "torch"] if args.device == "both" or (args.device == "triton" and not args.only) \
        else [args.device]
    dtype = getattr(torch, args.dtype)
    itemsize = torch.empty(0, dtype=dtype).element_size()
    props = torch.cuda.get_device_properties(0)
    copy_bw = copy_bandwidth(torch)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    print(f"GPU: {props.name}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MiB; torch {torch.__version__}")
    print(f"measured device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    print(f"triton config: {config}")
    header = ("device", "batch", "K", "V", "mode", "median ms", "floor MB", "floor ms", "GB/s", "% of copy BW")
    rows = []
    for V in args.vocab:
        for B in args.batch:
            for K in args.k:
                for mode in args.modes:
                    nbytes = floor_bytes(B, K, V, itemsize, mode)
                    nsets = max(2, min(8, -(-4 * l2 // nbytes)))  # ≥ 4× L2 of distinct inputs per rotation
                    sets = [make_inputs(torch, B, K, V, dtype, mode, seed) for seed in range(nsets)]
                    for name in names:
                        call = _callers(torch, name, config)
                        variants = [(name, lambda i: call(sets[i % nsets]))]
                        if name == "triton" and not args.no_graph:
                            graphs = _graphs(torch, call, sets)
                            variants.insert(0, ("triton graph", lambda i: graphs[i % nsets].replay()))
                        for label, fn in variants:
                            t = _median(_time(torch, fn, args.reps, args.warmup))
                            gbs = nbytes / t / 1e9
                            rows.append((label, B, K, V, mode, f"{t * 1e3:.3f}", f"{nbytes / 1e6:.0f}",
                                         f"{nbytes / copy_bw * 1e3:.3f}", f"{gbs:.0f}",
                                         f"{100 * nbytes / t / copy_bw:.0f}%"))
                            print("  ".join(str(c) for c in rows[-1]), flush=True)
                        if args.breakdown and name == "triton":
                            ph = kernel_times(torch, call, sets)
                            print("    triton kernels, device ms per call: " + ", ".join(
                                f"{n.replace('_kernel', '')} {p * 1e3:.3f}" for n, p in ph.items()), flush=True)
                    del sets
                    torch.cuda.empty_cache()
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    print()
    for r in [header] + rows:
        print("  ".join(f"{str(c):>{w}}" for c, w in zip(r, widths)))
    return 0
