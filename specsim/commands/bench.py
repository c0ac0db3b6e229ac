"""``specsim bench``: time one verification step on a GPU against its floor, beside vLLM's sampler.

Two floors, both over the device-to-device copy bandwidth measured in the
same run (bytes read + written):

* **algorithmic** (the headline): the bytes the algorithm cannot avoid —
  every target row once (each row's softmax statistics or greedy argmax),
  plus, per random request, the ONE target row it emits from and, with draft
  probabilities, the ONE draft row of its residual; acceptance itself needs
  only gathers ``t(x)``, ``d(x)``;
* **all rows** (the old floor, beside it): every target logit and every draft
  probability read once — more than the algorithm needs, so a step can beat it.

Each device runs the same inputs: random logits (normal × 2, in ``--dtype``),
never-zero random draft probabilities (a softmax; float32 with 16-bit logits),
random drafts, keyed Philox noise (SPEC §5.2). Method (the device tool's
METHOD.md): CUDA events around each call, warm-up, median of many, enough
input sets rotated that each call reads memory, not L2.

Rows, per shape and mode:

* ``triton graph`` — a CUDA graph of the step captured here and replayed: the
  kernels alone, as an engine that graphs its whole step runs them;
* ``triton eager`` — ``devices.triton_step.TritonStep`` called from Python each
  step, as an engine calls its sampler eagerly (it replays a CUDA graph it
  holds per call signature; see that module);
* ``triton launches`` — ``verify_tensors`` from Python each step: the two
  Triton launches and their host overhead, no graph;
* ``vllm`` — vLLM's rejection sampler on the same inputs, in the same run,
  when ``devices.field.vllm_bench`` can load it (the hook; see ``_vllm_step``):
  its whole ``RejectionSampler.forward``, bonus sample included (what vLLM runs
  per step; the ``vs vllm`` ratio's base);
* ``vllm rejection_sample`` — its ``rejection_sample`` function alone, the
  target rows already processed and the bonus drawn outside the timed call;
* ``torch`` — the torch device (it synchronises once per call).

Example (the anchor)::

    specsim bench --batch 256 --k 4 --vocab 128256

prints one line per row as it is measured, then the table: median ms, the
algorithmic floor (MB, ms, and the step's share of it: floor time / median)
and the all-rows floor's share, and each row's time relative to vLLM's.
"""

from __future__ import annotations

HELP = "time a verification step on a GPU vs. its bandwidth floors and vLLM's sampler (needs CUDA)"

DTYPES = ("float32", "bfloat16", "float16", "float64")


def add_arguments(p):
    p.add_argument("--devices", nargs="+", default=["triton", "vllm", "torch"], choices=["triton", "vllm", "torch"],
                   help="what to time (default: all three; vllm only where it loads)")
    p.add_argument("--batch", type=int, nargs="+", default=[256])
    p.add_argument("--k", type=int, nargs="+", default=[4])
    p.add_argument("--vocab", type=int, nargs="+", default=[128256])
    p.add_argument("--dtype", default="float32", choices=DTYPES,
                   help="target logits' dtype (16-bit logits go with float32 draft probabilities)")
    p.add_argument("--modes", nargs="+", default=["draft", "point", "greedy"], choices=["draft", "point", "greedy"],
                   help="draft: full rejection with draft probs; point: no draft probs; greedy: T = 0")
    p.add_argument("--reps", type=int, default=50, help="timed calls (median reported)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--no-graph", action="store_true", help="skip the 'triton graph' row")
    p.add_argument("--no-launches", action="store_true", help="skip the 'triton launches' row")
    p.add_argument("--breakdown", action="store_true", help="also profile the Triton kernels (device time each)")
    p.add_argument("--block", type=int, default=None, help="Triton vocabulary tile (default: KernelConfig)")
    p.add_argument("--warps", type=int, default=None, help="Triton num_warps")
    p.add_argument("--programs", type=int, default=None, help="Triton programs per pass")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the rows as JSON")
    p.add_argument("--sampler", choices=["off", "all"], default="off",
                   help="all: also time SPEC §12 with every parameter on (rows 'triton filters', "
                        "'triton filters eager', 'triton filters torch.topk', 'triton §12' (fused), "
                        "'triton §12 unfused', 'triton §12+filters', 'vllm filters', 'vllm §12 (served)': vLLM "
                        "with the parameters it serves with spec decode, no mask, bias or min_p; draft and point "
                        "modes; see sampler_params)")


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


def draft_dtype(torch, logits_dtype):
    """Draft probabilities' dtype: the logits' for float32/float64, float32 for 16-bit logits."""
    return logits_dtype if logits_dtype in (torch.float32, torch.float64) else torch.float32


def make_inputs(torch, batch: int, k: int, vocab: int, dtype, mode: str, seed: int) -> dict:
    """One input set on the GPU: ``target_logits`` ``[batch·(k+1), V]`` in ``dtype``, ``draft_probs``
    ``[batch·k, V]`` (softmax of normals: never zero) or None, drafts, temperature, keyed noise."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = batch * k
    logits = (torch.randn(n + batch, vocab, device="cuda", dtype=torch.float32, generator=g) * 2).to(dtype)
    draft = torch.softmax(torch.randn(n, vocab, device="cuda", dtype=draft_dtype(torch, dtype), generator=g) * 2,
                          dim=1) if mode == "draft" else None
    temperature = torch.full((batch,), 0.0 if mode == "greedy" else 1.0, device="cuda", dtype=torch.float64)
    return dict(num_draft_tokens=torch.full((batch,), k, device="cuda", dtype=torch.int64),
                cu=torch.arange(batch + 1, device="cuda", dtype=torch.int64) * k,
                draft_token_ids=torch.randint(0, vocab, (n,), device="cuda", generator=g),
                draft_probs=draft, target_logits=logits, temperature=temperature,
                seeds=torch.randint(-2**62, 2**62, (batch,), device="cuda", generator=g),
                positions=torch.randint(0, 2**20, (batch,), device="cuda", generator=g), max_k=k, mode=mode)


def floor_bytes(batch: int, k: int, vocab: int, logit_size: int, prob_size: int, mode: str) -> tuple[int, int]:
    """``(algorithmic, all_rows)`` bytes of one step.

    Algorithmic: every target row once, plus per random request one target row
    (the row it emits from) and, with draft probabilities, one draft row.
    All rows: every target row and every draft row once.

    >>> [round(b / 1e6) for b in floor_bytes(256, 4, 128256, 4, 4, "draft")]
    [919, 1182]
    >>> [round(b / 1e6) for b in floor_bytes(256, 4, 128256, 4, 4, "point")]
    [788, 657]
    """
    target = batch * (k + 1) * vocab * logit_size
    emit = 0 if mode == "greedy" else batch * vocab * logit_size
    draft_row = batch * vocab * prob_size if mode == "draft" else 0
    all_drafts = batch * k * vocab * prob_size if mode == "draft" else 0
    return target + emit + draft_row, target + all_drafts


def _triton_call(call):
    return lambda x: call(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"], x["temperature"],
                          max_k=x["max_k"], seeds=x["seeds"], positions=x["positions"])


def _torch_step(torch):
    from devices.torch_device import verify_tensors as torch_verify
    filters = {}

    def call(x):
        b = x["temperature"].shape[0]
        if b not in filters:
            filters[b] = (torch.zeros(b, device="cuda", dtype=torch.int64),
                          torch.ones(b, device="cuda", dtype=torch.float64))
        top_k, top_p = filters[b]
        return torch_verify(x["num_draft_tokens"], x["draft_token_ids"], x["draft_probs"], x["target_logits"],
                            x["temperature"], top_k, top_p, seeds=x["seeds"], positions=x["positions"],
                            max_k=x["max_k"])
    return call


def _vllm_step(**filters):
    """vLLM's rejection sampler as ``call(x)`` on this command's inputs, or ``(None, why not)``.

    The hook: ``devices.field.vllm_bench.make_step()`` (the field adapter's
    loader takes vLLM's sampler module out of its wheel) returns
    ``(call, label)``, ``call(x)`` running vLLM's sampler on an input dict of
    ``make_inputs`` (its keys: ``cu``, ``num_draft_tokens``, ``draft_token_ids``,
    ``draft_probs``, ``target_logits``, ``temperature``, ``seeds``, ``positions``,
    ``max_k``, ``mode``) the way vLLM's model runner calls it.
    """
    return _vllm_hook("make_step", **filters)


def _vllm_hook(name: str, **kwargs):
    """``devices.field.vllm_bench.<name>()``, or ``(None, why not)``. ``make_step``: vLLM's whole
    ``RejectionSampler.forward`` (the ``vllm`` row, the ratio's base); ``make_rejection_sample_step``:
    its ``rejection_sample`` function alone (the ``vllm rejection_sample`` row)."""
    try:
        from devices.field import vllm_bench
    except ImportError as e:
        return None, f"vLLM's sampler not loadable here ({e})"
    try:
        return getattr(vllm_bench, name)(**kwargs)
    except Exception as e:  # the loader's reason: wheel missing, version mismatch, ...
        return None, f"vLLM's sampler did not load ({type(e).__name__}: {e})"


def _graphs(torch, call, sets) -> list:
    """One CUDA graph per input set (the step has no host sync, so it captures whole)."""
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


KERNELS = ("stats_kernel", "step_kernel", "live_kernel", "edit_stats_kernel", "fused_stats_kernel", "process_kernel",
           "edit_kernel", "group_max_kernel", "compact_kernel")


def kernel_times(torch, call, sets, reps: int = 20) -> dict[str, float]:
    """Device seconds per call of each Triton kernel (torch.profiler), calls back to back;
    anything else (torch's own kernels, if any) is summed under ``"other"``."""
    from torch.profiler import ProfilerActivity, profile

    for i in range(3):
        call(sets[i % len(sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            call(sets[i % len(sets)])
        torch.cuda.synchronize()
    times = {e.key: getattr(e, "device_time_total", 0) * 1e-6 / reps for e in prof.key_averages()}
    ours = {k: v for k, v in times.items() if k in KERNELS}
    ours["other"] = sum(times.values()) - sum(ours.values())
    return ours


# --- SPEC §12: every sampler parameter on (--sampler all) ------------------------------

FILTERS = dict(top_k=50, top_p=0.9, min_p=0.05)
"""The filters of the ``filters`` rows: top-k and top-p, and min_p where §12 is on."""


def sampler_params(batch: int, k: int, vocab: int, draft_token_ids, seed: int, prompt: int = 512, output: int = 64):
    """``devices.protocol.SamplerParams`` with every SPEC §12 parameter on, at strengths engines use:
    a ``prompt``-token prompt and an ``output``-token output per request (repetition 1.1, frequency
    0.2, presence 0.1 on them and the drafts), four bad words of 2–3 tokens each ending in the
    request's first draft's prefix (so some complete along the drafts), min_tokens past this step
    with two stop ids, a logit bias on every entry (``N(0, 0.1)``), allowed ids (a random 90 %),
    a token mask per row (a random 95 %), min_p 0.05 (the ``vllm`` order)."""
    import numpy as np

    from devices.protocol import SamplerParams
    rng = np.random.default_rng(seed)
    ids = lambda n: rng.integers(0, vocab, n)  # noqa: E731
    drafts = np.asarray(draft_token_ids).reshape(batch, k)
    words = tuple(tuple(np.array([*ids(n - 2), drafts[i, 0], ids(1)[0]]) for n in (2, 3, 2, 3)) for i in range(batch))
    return SamplerParams(
        order="vllm", prompt_token_ids=tuple(ids(prompt) for _ in range(batch)),
        output_token_ids=tuple(ids(output) for _ in range(batch)),
        token_mask=rng.random((batch * (k + 1), vocab)) < 0.95,
        allowed_token_ids=tuple(np.flatnonzero(rng.random(vocab) < 0.9) for _ in range(batch)), bad_words=words,
        min_tokens=np.full(batch, output + k + 1), stop_token_ids=tuple(ids(2) for _ in range(batch)),
        logit_bias=rng.normal(0, 0.1, (batch, vocab)).astype(np.float32),
        repetition_penalty=np.full(batch, 1.1), frequency_penalty=np.full(batch, 0.2),
        presence_penalty=np.full(batch, 0.1), min_p=np.full(batch, FILTERS["min_p"]))


def sampler_variants(torch, sets, config, with_vllm: bool) -> list:
    """The §12 rows of one shape: ``(label, fn(i), extra warm-up)``. The host work (``row_edits``,
    the dense rows, the packed bits) is done once per input set, outside the timing, as an engine
    keeps it across steps; the timed call is the GPU work of a step. ``triton §12``: the fused
    path (``verify_tensors(sampler=...)``: live bits, records, statistics, step — four launches, no
    processed rows); ``triton §12 unfused``: the two §12 launches writing the processed rows, then
    the plain step's two; the filter rows add the filters' cut (``filter_cuts``: the top-k
    candidates by ``devices/triton_topk.py``, float64 decisions on them, one host sync) read by
    the step's kernels — step after step (``devices.filter_graph.FilterCuts``: a CUDA graph of
    the cut's device work per input set), or ``eager``, or eager with ``torch.topk`` finding the
    candidates."""
    import numpy as np

    from devices.filter_cut import torch_top_values
    from devices.filter_graph import FilterCuts
    from devices.triton_device import _chunks, filter_cuts, triton_top_values, verify_tensors
    from devices.triton_mode import kernel_module
    ks = kernel_module("devices.triton_sampler", False)
    triton_values = triton_top_values(kernel_module("devices.triton_topk", False), config)
    graph_cuts = FilterCuts(triton_values)
    prepared = []
    for n, x in enumerate(sets):
        B, K = x["num_draft_tokens"].shape[0], x["max_k"]
        rows, V = x["target_logits"].shape
        params = sampler_params(B, K, V, x["draft_token_ids"].cpu().numpy(), seed=n)
        on = x["target_logits"].device
        inputs = ks.sampler_inputs(params, x["num_draft_tokens"].cpu().numpy(), x["draft_token_ids"].cpu().numpy(),
                                   V, on, torch.float32)
        fused = ks.fused_inputs(params, x["num_draft_tokens"].cpu().numpy(), x["draft_token_ids"].cpu().numpy(), V,
                                on, torch.float32)
        prepared.append((inputs, x["cu"].cpu().numpy(), x["temperature"].cpu().numpy(), fused))
    chunk = _chunks(V, rows, config.block, config.programs)[0]
    top_k, top_p, min_p = (np.full(B, FILTERS[name]) for name in ("top_k", "top_p", "min_p"))

    def step(x, logits, cut=None):
        return verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], logits, x["temperature"],
                              max_k=x["max_k"], seeds=x["seeds"], positions=x["positions"], config=config, cut=cut)

    def fused_step(i):
        x = sets[i % len(sets)]
        return verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"], x["temperature"],
                              max_k=x["max_k"], seeds=x["seeds"], positions=x["positions"], config=config,
                              sampler=prepared[i % len(sets)][3], sampler_kernels=ks)

    def processed(i):
        inputs = prepared[i % len(sets)][0]
        x = sets[i % len(sets)]
        return x, ks.process_logits(ks, x["target_logits"], x["cu"], x["max_k"], inputs, config.block, chunk,
                                    config.num_warps)

    def filters_only(i, cuts=graph_cuts):
        x = sets[i % len(sets)]
        _, cu, temperature, _ = prepared[i % len(sets)]
        return step(x, x["target_logits"], cuts(x["target_logits"], cu, temperature, top_k, top_p))

    def eager(top_values):
        return lambda *a, **kw: filter_cuts(*a, **kw, top_values=top_values)

    def all_on(i):
        x, logits = processed(i)
        _, cu, temperature, _ = prepared[i % len(sets)]
        return step(x, logits, graph_cuts(logits, cu, temperature, top_k, top_p, min_p, "vllm"))

    variants = [("triton filters", filters_only, 2 * len(sets)),
                ("triton filters eager", lambda i: filters_only(i, eager(triton_values)), 0),
                ("triton filters torch.topk", lambda i: filters_only(i, eager(torch_top_values)), 0),
                ("triton §12", fused_step, 0),
                ("triton §12 unfused", lambda i: step(*processed(i)), 0), ("triton §12+filters", all_on, 2 * len(sets))]
    if with_vllm:
        call, label = _vllm_step(top_k=FILTERS["top_k"], top_p=FILTERS["top_p"])
        if call is not None:
            variants.append(("vllm filters", lambda i: call(sets[i % len(sets)]), len(sets)))
        # vLLM with the §12 parameters it serves with spec decode (penalties, bad words, allowed ids,
        # min_tokens; no mask, bias or min_p: devices.field.vllm_device.served_only): not triton §12's work
        params = {id(x): sampler_params(x["num_draft_tokens"].shape[0], x["max_k"], x["target_logits"].shape[1],
                                        x["draft_token_ids"].cpu().numpy(), seed=n) for n, x in enumerate(sets)}
        served, _ = _vllm_step(sampler=lambda x: params[id(x)])
        if served is not None:
            variants.append(("vllm §12 (served)", lambda i: served(sets[i % len(sets)]), len(sets)))
    return variants


HEADER = ("device", "batch", "K", "V", "mode", "dtype", "median ms", "alg floor MB", "alg floor ms",
          "% of alg floor", "% of all-rows floor", "vs vllm")


def run(args) -> int:
    try:
        import torch
    except ImportError:
        print("specsim bench: needs torch with CUDA")
        return 2
    if not torch.cuda.is_available():
        print("specsim bench: no CUDA GPU here; the benchmark times GPU kernels and has nothing to measure on CPU")
        return 2
    from devices.triton_device import KernelConfig, verify_tensors
    from devices.triton_step import TritonStep

    base = KernelConfig()
    config = KernelConfig(block=args.block or base.block, num_warps=args.warps or base.num_warps,
                          programs=args.programs or base.programs)
    dtype = getattr(torch, args.dtype)
    logit_size = torch.empty(0, dtype=dtype).element_size()
    prob_size = torch.empty(0, dtype=draft_dtype(torch, dtype)).element_size()
    props = torch.cuda.get_device_properties(0)
    copy_bw = copy_bandwidth(torch)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    import triton
    print(f"GPU: {props.name}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MiB; torch {torch.__version__}, "
          f"triton {triton.__version__}")
    print(f"measured device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    print(f"triton config: {config}")
    vllm_call, vllm_label = _vllm_step() if "vllm" in args.devices else (None, "not asked for")
    print(f"vllm: {vllm_label}")
    kernel_call, kernel_label = _vllm_hook("make_rejection_sample_step") if vllm_call else (None, "")
    if kernel_call is not None:
        print(f"vllm rejection_sample: {kernel_label}")
    rows = []
    for V in args.vocab:
        for B in args.batch:
            for K in args.k:
                for mode in args.modes:
                    alg, all_rows = floor_bytes(B, K, V, logit_size, prob_size, mode)
                    nsets = max(2, min(8, -(-4 * l2 // all_rows)))  # ≥ 4× L2 of distinct inputs per rotation
                    sets = [make_inputs(torch, B, K, V, dtype, mode, seed) for seed in range(nsets)]
                    variants = []
                    if "triton" in args.devices:
                        launches = _triton_call(lambda *a, **kw: verify_tensors(*a, config=config, **kw))
                        if not args.no_graph:
                            graphs = _graphs(torch, launches, sets)
                            variants.append(("triton graph", lambda i, g=graphs: g[i % nsets].replay(), 0))
                        eager = _triton_call(TritonStep(config))
                        variants.append(("triton eager", lambda i, f=eager: f(sets[i % nsets]), 2 * nsets))
                        if not args.no_launches:
                            variants.append(("triton launches", lambda i, f=launches: f(sets[i % nsets]), 0))
                    if vllm_call is not None:
                        variants.append(("vllm", lambda i: vllm_call(sets[i % nsets]), nsets))
                    if kernel_call is not None:
                        variants.append(("vllm rejection_sample", lambda i: kernel_call(sets[i % nsets]), nsets))
                    if args.sampler == "all" and mode != "greedy":
                        variants += sampler_variants(torch, sets, config, "vllm" in args.devices)
                    if "torch" in args.devices:
                        step = _torch_step(torch)
                        variants.append(("torch", lambda i, f=step: f(sets[i % nsets]), 0))
                    measured = {}
                    for label, fn, extra_warmup in variants:
                        t = _median(_time(torch, fn, args.reps, args.warmup + extra_warmup))
                        measured[label] = t
                        rows.append(dict(device=label, batch=B, K=K, V=V, mode=mode, dtype=args.dtype,
                                         median_ms=t * 1e3, alg_floor_mb=alg / 1e6, alg_floor_ms=alg / copy_bw * 1e3,
                                         pct_alg_floor=100 * alg / copy_bw / t,
                                         pct_all_rows_floor=100 * all_rows / copy_bw / t))
                        print("  ".join(str(c) for c in _cells(rows[-1])), flush=True)
                    for r in rows:  # vLLM's time is known once its row ran: fill the ratio in
                        if (r["batch"], r["K"], r["V"], r["mode"]) == (B, K, V, mode) and "vllm" in measured:
                            r["vs_vllm"] = r["median_ms"] / (measured["vllm"] * 1e3)
                    if args.breakdown and "triton" in args.devices:
                        ph = kernel_times(torch, _triton_call(lambda *a, **kw: verify_tensors(*a, config=config, **kw)),
                                          sets)
                        print("    triton kernels, device ms per call: " + ", ".join(
                            f"{n.replace('_kernel', '')} {p * 1e3:.3f}" for n, p in ph.items()), flush=True)
                        for label, fn, _ in variants:
                            if label in ("triton §12", "triton §12 unfused", "triton filters",
                                         "triton filters eager", "triton filters torch.topk",
                                         "triton §12+filters"):
                                index = {id(x): n for n, x in enumerate(sets)}
                                ph = kernel_times(torch, lambda x, f=fn: f(index[id(x)]), sets)
                                print(f"    {label} kernels, device ms per call: " + ", ".join(
                                    f"{n.replace('_kernel', '')} {p * 1e3:.3f}" for n, p in ph.items()), flush=True)
                    del sets, variants
                    torch.cuda.empty_cache()
    table = [HEADER] + [_cells(r) for r in rows]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(HEADER))]
    print()
    for r in table:
        print("  ".join(f"{str(c):>{w}}" for c, w in zip(r, widths)))
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump({"gpu": props.name, "copy_gb_s": copy_bw / 1e9, "torch": torch.__version__,
                       "triton": triton.__version__, "vllm": vllm_label, "config": str(config), "rows": rows}, f,
                      indent=1)
    return 0


def _cells(r: dict) -> tuple:
    return (r["device"], r["batch"], r["K"], r["V"], r["mode"], r["dtype"], f"{r['median_ms']:.3f}",
            f"{r['alg_floor_mb']:.0f}", f"{r['alg_floor_ms']:.3f}", f"{r['pct_alg_floor']:.0f}%",
            f"{r['pct_all_rows_floor']:.0f}%", f"{r['vs_vllm']:.2f}x" if "vs_vllm" in r else "-")

