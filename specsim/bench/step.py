"""One verification step timed on a GPU against its floors, beside vLLM's sampler: ``specsim bench``.

Every device runs the same inputs (``workloads.make_inputs``), timed as
``harness`` times (CUDA events around each call, warm-up, median of many,
enough input sets rotated that each call reads memory, not L2), and set
against the two floors of ``workloads.floor_bytes`` over the device-to-device
copy bandwidth measured in the same run.

Rows, per shape and mode:

* ``triton graph`` — a CUDA graph of the step captured here and replayed: the
  kernels alone, as an engine that graphs its whole step runs them;
* ``triton eager`` — ``devices.triton_step.TritonStep`` called from Python each
  step, as an engine calls its sampler eagerly (it replays a CUDA graph it
  holds per call signature; see that module);
* ``triton launches`` — ``verify_tensors`` from Python each step: the two
  Triton launches and their host overhead, no graph;
* ``vllm`` — vLLM's rejection sampler on the same inputs, in the same run,
  where ``field.vllm_step`` can load it: its whole ``RejectionSampler.forward``,
  bonus sample included (what vLLM runs per step; the ``vs vllm`` ratio's base);
* ``vllm rejection_sample`` — its ``rejection_sample`` function alone, the
  target rows already processed and the bonus drawn outside the timed call;
* ``vllm v2`` — vLLM's Model Runner V2 verifier (``field.vllm_v2_step``:
  ``RejectionSampler._verify_in_chunks``, what ``devices.field.vllm_v2_device`` calls), where it loads;
* ``flashinfer`` — FlashInfer's softmax and ``chain_speculative_sampling``
  (``field.flashinfer_step``), draft mode and float32 only, where ``flashinfer`` imports;
* ``torch`` — the torch device (it synchronises once per call);
* with ``sampler="all"``, the SPEC §12 rows of ``sampler_variants``.

Each row is set against two references: the plain step's algorithmic floor
(``alg floor``, the same for every row of a shape) and its own floor
(``workloads.row_floor_bytes``: the plain floor plus the row's own inputs — a §12
row's bias, masks and records, a filter row's parameters — read once, from the
sizes of the tensors it is handed), with the bandwidth it achieved over its own
floor (floor bytes / median time) and its time over the same shape's ``triton
graph`` (``vs plain``). ``goal_rows`` holds the rows against the step's goals
(``GOALS``), each with its floor and bandwidth as the bound that explains it.

``measure`` runs the shapes and prints one line per row as it is measured;
``table_lines`` is the table printed at the end; ``record`` is the same table
(and the kernel breakdown) as a record of ``specsim.figures.records``. Every
run also measures the read stream (``floors.read_bandwidth``): each row's
``% of read stream`` is its floor bytes at that bandwidth over its median.

``measure_latency`` (``specsim bench --latency``) times the small batches of
real decoding (``LATENCY_RUN``) and the tree kernel at batch 8, and sets each
row against floors measured in the same run (``floors``: its launches, one
pass over its bytes, its bytes; ``add_bounds``); ``latency_table`` and
``latency_goal_rows`` are the two tables it prints and records.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from specsim.bench import harness, workloads
from specsim.bench.field import (V2_DTYPES, flashinfer_step, flashinfer_version, vllm_rejection_sample_step,
                                 vllm_step, vllm_v2_step, vllm_version)

DTYPES = ("float32", "bfloat16", "float16", "float64")
DEVICES = ("triton", "vllm", "vllm-v2", "flashinfer", "torch")
MODES = ("draft", "point", "greedy")


@dataclass
class Options:
    """What ``measure`` times: the cross product of ``batch`` × ``k`` × ``vocab`` × ``modes`` for ``devices``."""

    devices: list = field(default_factory=lambda: list(DEVICES))
    batch: list = field(default_factory=lambda: [256])
    k: list = field(default_factory=lambda: [4])
    vocab: list = field(default_factory=lambda: [128256])
    dtype: str = "float32"
    modes: list = field(default_factory=lambda: list(MODES))
    reps: int = 50
    warmup: int = 5
    no_graph: bool = False
    no_launches: bool = False
    breakdown: bool = False
    block: int | None = None
    warps: int | None = None
    programs: int | None = None
    sampler: str = "off"
    device_time: bool = False
    """Also time each row on the device alone (``harness.time_queued``): its ``device_ms``."""
    host_load: int = 0
    """Processes kept spinning on the host's CPUs while the rows are timed (``harness.host_load``)."""


@dataclass
class BenchResult:
    """What one ``measure`` found: the rows (one dict per device, shape and mode), the kernel breakdowns
    (``breakdown``) and what the figures depend on (hardware, versions, copy bandwidth, Triton config)."""

    hardware: str
    versions: dict
    gpu: str
    copy_bw: float
    config: str
    vllm: str
    rows: list = field(default_factory=list)
    kernels: list = field(default_factory=list)
    engines: dict = field(default_factory=dict)
    """The field engines beside vLLM's V1 sampler (``vllm v2``, ``flashinfer``): their label, or why absent."""
    sampler: str = "off"
    trees: list = field(default_factory=list)
    """The tree goal's kernel timings (``measure_goals``): one dict per variant, ``variant``, ``batch``, ``V``,
    ``chain_ms`` (the chain kernels at K = N), ``tree_ms``, ``accepted`` (mean accepted length)."""
    read_bw: float = 0.0
    """The read stream measured in the same run, bytes/s (``floors.read_bandwidth``); 0 where not measured."""
    latency: bool = False
    """A ``--latency`` run (``measure_latency``): its rows carry their measured floors, and the latency
    tables follow."""
    latency_trees: list = field(default_factory=list)
    """The latency run's tree kernel timings (``LATENCY_TREE``), as ``trees``' dicts."""
    race_floors: dict = field(default_factory=dict)
    """``{(batch, V): seconds}``: the keyed race's Philox counters alone at each shape with point proposals
    (``floors.philox_floor``), the instruction bound a point-proposal goal adds to its floor."""
    host_load: str = ""
    """How loaded the host was while the rows were timed (``Options.host_load``), in words; empty: not loaded."""


HEADER = ("device", "batch", "K", "V", "mode", "dtype", "median ms", "alg floor MB", "alg floor ms",
          "% of alg floor", "% of all-rows floor", "vs vllm", "floor MB", "% of its floor", "GB/s achieved",
          "vs plain", "% of read stream")
"""``alg floor``: the plain step's (every row of a shape alike); ``floor MB``: the row's own
(``workloads.row_floor_bytes``), ``% of its floor`` its floor time over the median, ``GB/s achieved`` its
floor bytes over the median; ``vs plain``: the median over the same shape's ``triton graph``; ``% of read
stream``: its floor bytes over the read stream measured in the same run (``floors.read_bandwidth``),
over the median."""
KERNEL_HEADER = ("device", "batch", "K", "V", "mode", "device ms per call")
SAMPLER_ROWS = ("triton §12", "triton §12 eager", "triton §12 unfused", "triton filters", "triton filters eager",
                "triton filters launches", "triton filters torch.topk", "triton §12+filters", "triton §12+filters eager",
                "triton §12+filters processed")
"""The §12 rows a breakdown profiles beside the plain Triton step."""


def cells(r: dict) -> tuple:
    """One printed row of ``HEADER`` from a row dict of ``measure``."""
    return (r["device"], r["batch"], r["K"], r["V"], r["mode"], r["dtype"], f"{r['median_ms']:.3f}",
            f"{r['alg_floor_mb']:.0f}", f"{r['alg_floor_ms']:.3f}", f"{r['pct_alg_floor']:.0f}%",
            f"{r['pct_all_rows_floor']:.0f}%", f"{r['vs_vllm']:.2f}x" if "vs_vllm" in r else "-",
            f"{r['floor_mb']:.0f}", f"{r['pct_floor']:.0f}%", f"{r['gb_s']:.0f}",
            f"{r['vs_plain']:.2f}x" if "vs_plain" in r else "-",
            f"{r['pct_read_stream']:.0f}%" if "pct_read_stream" in r else "-")


def kernel_cells(k: dict) -> tuple:
    """One row of ``KERNEL_HEADER``: a row's device milliseconds per call, kernel by kernel."""
    return (k["device"], k["batch"], k["K"], k["V"], k["mode"], kernels_text(k["seconds"]))


def kernels_text(seconds: dict[str, float]) -> str:
    """``{kernel: s}`` as ``stats 0.220, step 0.108`` (device ms per call).

    >>> kernels_text({"stats_kernel": 0.00022, "step_kernel": 0.000108, "other": 0.0})
    'stats 0.220, step 0.108, other 0.000'
    """
    return ", ".join(f"{n.replace('_kernel', '')} {p * 1e3:.3f}" for n, p in seconds.items())


def table_lines(header: tuple, rows: list[tuple]) -> list[str]:
    """The table as printed: columns right-aligned to their widest cell.

    >>> table_lines(("a", "bb"), [("10", "1")])
    [' a  bb', '10   1']
    """
    table = [header, *rows]
    widths = [max(len(str(r[i])) for r in table) for i in range(len(header))]
    return ["  ".join(f"{str(c):>{w}}" for c, w in zip(r, widths)) for r in table]


def measure(torch, opts: Options, out=print) -> BenchResult:
    """Every shape and mode of ``opts`` on the GPU, one line through ``out`` per row as it is measured."""
    import triton

    config = launch_shape(opts)
    props = torch.cuda.get_device_properties(0)
    copy_bw = harness.copy_bandwidth(torch)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    gpu = f"{props.name}, {props.multi_processor_count} SMs, L2 {l2 >> 20} MiB"
    out(f"GPU: {gpu}; torch {torch.__version__}, triton {triton.__version__}")
    out(f"measured device-to-device copy: {copy_bw / 1e9:.0f} GB/s (read + write)")
    from specsim.bench import floors
    read_bw = floors.read_bandwidth(torch)
    out(f"measured read stream: {read_bw / 1e9:.0f} GB/s (read only, one pass over "
        f"{floors.BANDWIDTH_BYTES >> 30} GiB)")
    out(f"triton config: {config_text(config)}")
    race_floors = {}
    if "point" in opts.modes:
        for B in opts.batch:
            for V in opts.vocab:
                race_floors[(B, V)] = floors.philox_floor(torch, B, V)
                out(f"the race's Philox alone at B={B} V={V} (ceil(V/4) counters a request, nothing read): "
                    f"{race_floors[(B, V)] * 1e3:.4f} ms on the device")
    vllm_call, vllm_label = vllm_step() if "vllm" in opts.devices else (None, "not asked for")
    out(f"vllm: {vllm_label}")
    kernel_call, kernel_label = vllm_rejection_sample_step() if vllm_call else (None, "")
    if kernel_call is not None:
        out(f"vllm rejection_sample: {kernel_label}")
    engines = field_engines(opts)
    for name, (_, label) in engines.items():
        out(f"{name}: {label}")
    hardware, versions = harness.environment(torch)
    if vllm_call is not None and vllm_version():
        versions["vllm"] = vllm_version()
    if engines.get("flashinfer", (None,))[0] is not None and flashinfer_version():
        versions["flashinfer"] = flashinfer_version()
    result = BenchResult(hardware, versions, gpu, copy_bw, config_text(config), vllm_label,
                         engines={name: label for name, (_, label) in engines.items()}, sampler=opts.sampler,
                         read_bw=read_bw, race_floors=race_floors, host_load=host_load_text(opts.host_load))
    if result.host_load:
        out(f"host: {result.host_load}")
    calls = (vllm_call, kernel_call, {name: call for name, (call, _) in engines.items()})
    with harness.host_load(opts.host_load):
        for V in opts.vocab:
            for B in opts.batch:
                for K in opts.k:
                    for mode in opts.modes:
                        measure_shape(torch, opts, config, (B, K, V, mode), l2, calls, result, out)
                        torch.cuda.empty_cache()
    return result


def host_load_text(processes: int) -> str:
    """``Options.host_load`` in words, for a table's note; empty where the host was not loaded."""
    if not processes:
        return ""
    return f"host loaded by {processes} spinning processes on its {harness.cpu_count()} CPUs while the rows were timed"


FIELD_ENGINES = ("vllm v2", "flashinfer")
"""The field engines glued in ``field`` beside vLLM's V1 sampler: a row of theirs that fails is left out
and the table's note says why (the project's own rows fail loudly)."""


def field_engines(opts: Options) -> dict:
    """``{"vllm v2": (call, label), "flashinfer": (call, label)}`` for those of ``opts.devices``; ``call`` None
    and ``label`` the reason where an engine does not load, or does not take ``opts.dtype``."""
    engines = {}
    if "vllm-v2" in opts.devices:
        engines["vllm v2"] = (vllm_v2_step() if opts.dtype in V2_DTYPES else
                              (None, f"vLLM's Model Runner V2 takes {', '.join(V2_DTYPES)} logits, not {opts.dtype}"))
    if "flashinfer" in opts.devices:
        engines["flashinfer"] = (flashinfer_step() if opts.dtype == "float32" else
                                 (None, f"FlashInfer's chain_speculative_sampling takes float32, not {opts.dtype}"))
    return engines


def measure_shape(torch, opts: Options, config, shape: tuple, l2: int, vllm_calls: tuple, result: BenchResult,
                  out=print) -> None:
    """One ``(batch, K, V, mode)``: its rows into ``result.rows``, its breakdown into ``result.kernels``."""
    B, K, V, mode = shape
    floor_shape, sets = workloads.shape_inputs(torch, B, K, V, getattr(torch, opts.dtype), mode, l2)
    variants = step_variants(torch, opts, config, sets, mode, vllm_calls)
    for label, fn, extra_warmup, params in variants:
        try:
            t = harness.median(harness.time_calls(torch, fn, opts.reps, opts.warmup + extra_warmup))
        except Exception as e:
            if not label.startswith(FIELD_ENGINES):
                raise
            # a field engine that loaded but fails on these inputs: no row, the note says why
            why = f"{label} failed at B={B} K={K} V={V} {mode} ({type(e).__name__}: {e})"
            engine = next(name for name in FIELD_ENGINES if label.startswith(name))
            result.engines[engine] = f"{result.engines.get(engine, '')}; {why}".lstrip("; ")
            out(why, flush=True)
            continue
        result.rows.append(timed_row(label, (B, K, V, mode, opts.dtype), floor_shape, params, t, result.copy_bw,
                                     result.read_bw or None))
        line = "  ".join(str(c) for c in cells(result.rows[-1]))
        if opts.device_time:
            result.rows[-1]["device_ms"] = 1e3 * harness.median(harness.time_queued(torch, fn, opts.reps, opts.warmup))
            line += f"  (device alone {result.rows[-1]['device_ms']:.4f} ms)"
        out(line, flush=True)
    fill_ratios([r for r in result.rows if (r["batch"], r["K"], r["V"], r["mode"]) == (B, K, V, mode)])
    if opts.breakdown and "triton" in opts.devices:
        breakdown(torch, config, sets, variants, dict(batch=B, K=K, V=V, mode=mode, dtype=opts.dtype), result, out)


def timed_row(label: str, shape: tuple, floor_shape: tuple, params, seconds: float, copy_bw: float,
              read_bw: float | None = None) -> dict:
    """One row of ``result.rows``: ``label`` timed at ``seconds`` (median) on ``shape`` ``(batch, K, V, mode,
    dtype)``, against the plain step's floors of ``floor_shape`` (``workloads.floor_bytes``' arguments) and
    its own (``workloads.row_floor_bytes`` with ``params``, the row's own inputs), ``copy_bw`` bytes/s; with
    ``read_bw`` (the read stream, bytes/s) also ``pct_read_stream``, its floor bytes at that bandwidth over
    ``seconds``.

    >>> r = timed_row("triton §12", (2, 1, 64, "draft", "float32"), (2, 1, 64, 4, 4, "draft"),
    ...               {"logit_bias": __import__("numpy").zeros((2, 64), "float32")}, 1e-6, 5.12e9)
    >>> r["alg_floor_mb"] * 1e6, r["floor_mb"] * 1e6, round(r["pct_floor"]), round(r["gb_s"], 2)
    (2048.0, 3072.0, 60, 3.07)
    >>> "pct_read_stream" in r, round(timed_row("vllm", (2, 1, 64, "draft", "float32"), (2, 1, 64, 4, 4, "draft"),
    ...                                        None, 1e-6, 5.12e9, 4.096e9)["pct_read_stream"])
    (False, 50)
    """
    B, K, V, mode, dtype = shape
    alg, all_rows = workloads.floor_bytes(*floor_shape)
    own = workloads.row_floor_bytes(label, floor_shape, params)
    row = dict(device=label, batch=B, K=K, V=V, mode=mode, dtype=dtype, median_ms=seconds * 1e3,
               alg_floor_mb=alg / 1e6, alg_floor_ms=alg / copy_bw * 1e3, pct_alg_floor=100 * alg / copy_bw / seconds,
               pct_all_rows_floor=100 * all_rows / copy_bw / seconds, floor_mb=own / 1e6,
               pct_floor=100 * own / copy_bw / seconds, gb_s=own / seconds / 1e9)
    if read_bw:
        row["pct_read_stream"] = 100 * own / read_bw / seconds
    return row


def fill_ratios(rows: list[dict]) -> None:
    """``vs_vllm`` and ``vs_plain`` of one shape's ``rows``, once the base rows (``vllm``, ``triton graph``)
    ran: each row's median over theirs (left out where the base row is not among ``rows``)."""
    base = {r["device"]: r["median_ms"] for r in rows}
    for r in rows:
        for key, label in (("vs_vllm", "vllm"), ("vs_plain", "triton graph")):
            if label in base:
                r[key] = r["median_ms"] / base[label]


def launch_shape(opts: Options):
    """The Triton launch shape a run times: this GPU's tuned one (``triton_device.default_config``), or, where
    ``opts`` names a block, warps or programs, that shape with those values for every kind of call."""
    import dataclasses

    from devices.triton_device import default_config
    config = default_config()
    given = {name: value for name, value in (("block", opts.block), ("num_warps", opts.warps),
                                             ("programs", opts.programs)) if value}
    if opts.programs:  # the programs asked for, at every batch size
        given["programs_by_batch"] = ()
    return dataclasses.replace(config, **given, by_call=(), source=f"{config.source}, with {given}") if given else config


def launch_text(config) -> str:
    """A launch shape in words (16-bit: the statistics tile 16-bit logits run, ``KernelConfig.stats_block``).

    >>> from devices.triton_device import KernelConfig
    >>> launch_text(KernelConfig())
    'stats 2048 x 4 warps (16-bit 1024), stages default, programs 2112, race 512 x 2 warps'
    >>> launch_text(KernelConfig(programs_by_batch=((1, 1056), (256, 4224)))).split(", ", 2)[2][:50]
    'programs 2112 (B ≥ 1: 1056, B ≥ 256: 4224), race 5'
    """
    by_batch = "".join(f", B ≥ {b}: {p}" for b, p in config.programs_by_batch)
    programs = f"programs {config.programs}" + (f" ({by_batch[2:]})" if by_batch else "")
    races = "".join(f", B ≥ {b}: {t} x {w}" for b, t, w in config.race_by_batch)
    race_programs = "".join(f", B ≥ {b}: {p}" for b, p in config.race_programs_by_batch)
    return (f"stats {config.block} x {config.num_warps} warps (16-bit {config.stats_block(2)}), "
            f"stages {config.num_stages or 'default'}, {programs}, "
            f"race {config.race_block or config.block} x {config.race_warps or config.num_warps} warps"
            + (f" ({races[2:]})" if races else "")
            + (f", race programs {race_programs[2:]}" if race_programs else ""))


def config_text(config) -> str:
    """A launch shape with its kinds of call and where it comes from, in words (a table's note).

    >>> from devices.triton_device import KernelConfig
    >>> config_text(KernelConfig(source="defaults"))
    'stats 2048 x 4 warps (16-bit 1024), stages default, programs 2112, race 512 x 2 warps (defaults)'
    """
    kinds = "".join(f"; {key}: {launch_text(c)}" for key, c in config.by_call)
    return f"{launch_text(config)}{kinds} ({config.source})"


def graph_time(torch, harness, sets: list, config, reps: int, warmup: int, queued: bool = False) -> float:
    """Median seconds of the plain step with launch shape ``config`` as a CUDA graph per input set of
    ``sets`` (``workloads.make_inputs``), replayed in turn: the ``triton graph`` row's method (``queued``: its
    device time, ``harness.time_queued``)."""
    from devices.triton_device import verify_tensors
    graphs = harness.graphs(torch, triton_call(lambda *a, **kw: verify_tensors(*a, config=config, **kw)), sets)
    return harness.median(harness.time_calls(torch, lambda i: graphs[i % len(sets)].replay(), reps, warmup, queued))


def triton_call(call, **extra):
    """``call``, a ``verify_tensors``-shaped function, as ``f(x)`` on an input set of ``make_inputs`` (``extra``:
    keyword arguments passed on, e.g. ``TritonStep``'s ``filters``)."""
    return lambda x: call(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"], x["temperature"],
                          max_k=x["max_k"], seeds=x["seeds"], positions=x["positions"], **extra)


def torch_step(torch):
    """The torch device's ``verify_tensors`` as ``f(x)``, filters off (top-k 0, top-p 1)."""
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


def step_variants(torch, opts: Options, config, sets: list, mode: str, vllm_calls: tuple) -> list:
    """The rows of one shape: ``(label, fn(i), extra warm-up)``, ``fn(i)`` the step on input set ``i mod n``."""
    from devices.triton_device import verify_tensors
    from devices.triton_step import TritonStep
    nsets = len(sets)
    vllm_call, kernel_call, engines = vllm_calls
    variants = []
    if "triton" in opts.devices:
        launches = triton_call(lambda *a, **kw: verify_tensors(*a, config=config, **kw))
        if not opts.no_graph:
            graphs = harness.graphs(torch, launches, sets)
            variants.append(("triton graph", lambda i: graphs[i % nsets].replay(), 0, None))
        eager = triton_call(TritonStep(config))
        variants.append(("triton eager", lambda i: eager(sets[i % nsets]), 2 * nsets, None))
        if not opts.no_launches:
            variants.append(("triton launches", lambda i: launches(sets[i % nsets]), 0, None))
    if vllm_call is not None:
        variants.append(("vllm", lambda i: vllm_call(sets[i % nsets]), nsets, None))
    if kernel_call is not None:
        variants.append(("vllm rejection_sample", lambda i: kernel_call(sets[i % nsets]), nsets, None))
    variants += field_variants(engines, sets, mode)
    if opts.sampler == "all" and mode != "greedy":
        variants += sampler_variants(torch, sets, config, opts.devices, engines, not opts.no_launches)
    if "torch" in opts.devices:
        step = torch_step(torch)
        variants.append(("torch", lambda i: step(sets[i % nsets]), 0, None))
    return variants


def field_variants(engines: dict, sets: list, mode: str) -> list:
    """The field engines' plain rows of one shape (``vllm v2``, ``flashinfer``: draft mode only, its kernel
    takes draft rows), for those of ``engines`` (``{name: call or None}``) that loaded."""
    n = len(sets)
    return [(name, lambda i, c=call: c(sets[i % n]), n, None) for name, call in engines.items()
            if call is not None and (name != "flashinfer" or mode == "draft")]


def breakdown(torch, config, sets: list, variants: list, shape: dict, result: BenchResult, out=print) -> None:
    """Device time per kernel of the plain Triton step and of each §12 row of ``variants``."""
    from devices.triton_device import verify_tensors
    found = [("triton", harness.kernel_times(
        torch, triton_call(lambda *a, **kw: verify_tensors(*a, config=config, **kw)), sets))]
    index = {id(x): n for n, x in enumerate(sets)}
    found += [(label, harness.kernel_times(torch, lambda x, f=fn: f(index[id(x)]), sets))
              for label, fn, _, _ in variants if label in SAMPLER_ROWS]
    for label, seconds in found:
        out(f"    {label} kernels, device ms per call: {kernels_text(seconds)}", flush=True)
        result.kernels.append(dict(device=label, **shape, seconds=seconds))


# --- SPEC §12: every sampler parameter on (--sampler all) ------------------------------

def sampler_variants(torch, sets, config, devices, engines: dict, launches: bool = True) -> list:
    """The §12 rows of one shape: ``(label, fn(i), extra warm-up, the row's own inputs)`` (the inputs of
    the first set, for ``workloads.row_floor_bytes``); field rows for those of ``devices`` that are there
    (``engines``: the field engines' plain calls, None where absent); ``launches``: with the rows that launch
    every kernel from the host each step (``… launches``, ``… torch.topk``; ``--no-launches`` leaves them out). The host work (``row_edits``,
    the dense rows, the packed bits) is done once per input set, outside the timing, as an engine
    keeps it across steps; the timed call is the GPU work of a step. ``triton §12``: the fused
    path (``verify_tensors(sampler=...)``: live bits, records, statistics, step — four launches, no
    processed rows), a CUDA graph per input set as the plain step's ``triton graph``; ``… eager``: the
    same called from Python each step; ``triton §12 unfused``: the two §12 launches writing the processed rows, then
    the plain step's two; the filter rows add the filters' cut (``filter_cuts``: the top-k
    candidates by ``devices/triton_topk.py``, float64 decisions on them, no host sync) read by
    the step's kernels: ``triton filters``, the cut and the step one CUDA graph per input set, as the
    plain step's ``triton graph``; ``… eager``, ``devices.triton_step.TritonStep`` with the filters
    (``StepFilters``) called from Python each step, as the plain step's ``triton eager``; ``… launches``,
    ``filter_cuts`` and ``verify_tensors`` called from Python each step (every launch from the host), and
    ``… torch.topk``, the same with ``torch.topk`` finding the candidates. ``triton §12+filters``: the fused path with the cut of the §12 rows
    (``triton_device.sampler_cut``: live bits and records, then the candidates' sweep reading the
    raw rows through them, then the step — no processed rows), the whole step a CUDA graph per input
    set as the plain step's ``triton graph``; ``… eager``: the same called from Python each step (the
    cut's device work a graph, ``FilterCuts``); ``… processed``: the processed rows written, then the
    filters' cut of them and the plain step."""
    import numpy as np

    from devices.filter_cut import torch_top_values
    from devices.filter_graph import FilterCuts
    from devices.triton_device import filter_cuts, rows_sampler, triton_top_values, verify_tensors
    from devices.triton_host import vocab_chunks
    from devices.triton_mode import kernel_module
    from devices.triton_step import StepFilters, TritonStep
    FILTERS, sampler_params = workloads.FILTERS, workloads.sampler_params
    ks = kernel_module("devices.triton_sampler", False)
    topk = kernel_module("devices.triton_topk", False)
    triton_values = triton_top_values(topk, config)
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
    chunk = vocab_chunks(V, rows, config.block, config.programs)[0]
    top_k, top_p, min_p = (np.full(B, FILTERS[name]) for name in ("top_k", "top_p", "min_p"))
    # The fused path with filters: per input set, the live bits and records written into the same
    # buffers each step, and the cut read through them (eager: a graph of the cut, FilterCuts).
    swept = []
    for x, (_, cu, temperature, fused) in zip(sets, prepared):
        bufs = ks.fused_prepare(ks, x["target_logits"], x["cu"], x["temperature"], fused, x["max_k"])
        swept.append((bufs, FilterCuts(triton_top_values(topk, config, rows_sampler(topk, fused, bufs)))))

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

    def all_on_processed(i):
        x, logits = processed(i)
        _, cu, temperature, _ = prepared[i % len(sets)]
        return step(x, logits, graph_cuts(logits, cu, temperature, top_k, top_p, min_p, "vllm"))

    def all_on(i, graphed_cut: bool = True):
        x = sets[i % len(sets)]
        _, cu, temperature, fused = prepared[i % len(sets)]
        bufs, cuts = swept[i % len(sets)]
        ks.fused_prepare(ks, x["target_logits"], x["cu"], x["temperature"], fused, x["max_k"], out=bufs)
        args = (x["target_logits"], cu, temperature, top_k, top_p, min_p, "vllm")
        cut = cuts(*args) if graphed_cut else filter_cuts(*args, top_values=cuts.top_values)
        return verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"], x["temperature"],
                              max_k=x["max_k"], seeds=x["seeds"], positions=x["positions"], config=config,
                              sampler=fused, sampler_kernels=ks, cut=cut, prepared=bufs)

    # the whole fused step as one CUDA graph per input set, as the plain step's 'triton graph' row
    def set_of(x):
        return next(n for n, y in enumerate(sets) if y is x)
    whole = harness.graphs(torch, lambda x: all_on(set_of(x), False), sets)
    fused_whole = harness.graphs(torch, lambda x: fused_step(set_of(x)), sets)

    # the filtered step as an engine calls it (TritonStep with its filters: one graph of the cut and the step
    # per signature), and the same launches as one CUDA graph per input set, as the plain step's rows
    step_filters = [StepFilters(cu, temperature, top_k, top_p) for _, cu, temperature, _ in prepared]
    filtered = TritonStep(config, top_values=triton_values)
    filtered_eager = [triton_call(filtered, filters=f) for f in step_filters]   # made once, outside the timing
    filtered_launches = TritonStep(config, graphs=False, top_values=triton_values)
    filtered_whole = harness.graphs(torch, lambda x: triton_call(filtered_launches, filters=step_filters[set_of(x)])(x),
                                    sets)
    filters = dict(top_k=top_k, top_p=top_p)
    variants = [("triton filters", lambda i: filtered_whole[i % len(filtered_whole)].replay(), 0, filters),
                ("triton filters eager", lambda i: filtered_eager[i % len(sets)](sets[i % len(sets)]), 2 * len(sets),
                 filters),
                *([("triton filters launches", lambda i: filters_only(i, eager(triton_values)), 0, filters),
                   ("triton filters torch.topk", lambda i: filters_only(i, eager(torch_top_values)), 0, filters)]
                  if launches else []),
                ("triton §12", lambda i: fused_whole[i % len(fused_whole)].replay(), 0, prepared[0][3]),
                ("triton §12 eager", fused_step, 0, prepared[0][3]),
                ("triton §12 unfused", lambda i: step(*processed(i)), 0, prepared[0][0]),
                ("triton §12+filters", lambda i: whole[i % len(whole)].replay(), 0, (prepared[0][3], filters)),
                ("triton §12+filters eager", all_on, 2 * len(sets), (prepared[0][3], filters)),
                ("triton §12+filters processed", all_on_processed, 2 * len(sets), (prepared[0][0], filters))]
    nsets = len(sets)
    if "vllm" in devices:
        call, label = vllm_step(top_k=FILTERS["top_k"], top_p=FILTERS["top_p"])
        if call is not None:
            variants.append(("vllm filters", lambda i: call(sets[i % nsets]), nsets, filters))
        # vLLM with the §12 parameters it serves with spec decode (penalties, bad words, allowed ids,
        # min_tokens; no mask, bias or min_p: devices.field.vllm_device.served_only): not triton §12's work
        params = {id(x): sampler_params(x["num_draft_tokens"].shape[0], x["max_k"], x["target_logits"].shape[1],
                                        x["draft_token_ids"].cpu().numpy(), seed=n) for n, x in enumerate(sets)}
        served, _ = vllm_step(sampler=lambda x: params[id(x)])
        if served is not None:
            from devices.field.vllm_device import served_only
            variants.append(("vllm §12 (served)", lambda i: served(sets[i % nsets]), nsets,
                             served_only(params[id(sets[0])])))
    variants += field_filter_variants(engines, sets, filters)
    return variants


def field_filter_variants(engines: dict, sets: list, filters: dict) -> list:
    """``vllm v2 filters`` and ``flashinfer filters`` (draft mode only): the field engines with
    ``workloads.FILTERS``' top-k and top-p, for those of ``engines`` that loaded plain."""
    n, mode = len(sets), sets[0]["mode"]
    found = []
    for name, make in (("vllm v2", vllm_v2_step), ("flashinfer", flashinfer_step)):
        if engines.get(name) is None or (name == "flashinfer" and mode != "draft"):
            continue
        call, _ = make(top_k=workloads.FILTERS["top_k"], top_p=workloads.FILTERS["top_p"])
        if call is not None:
            found.append((f"{name} filters", lambda i, c=call: c(sets[i % n]), n, filters))
    return found


# --- what a run leaves: the JSON rows and the record ------------------------------------

def to_json(result: BenchResult) -> dict:
    """``--json``'s document: the rows and what they were measured on (with ``--latency``, each row's floor
    columns, the tree rows and the latency goals; ``philox_floor_s``: the race's Philox alone per point shape)."""
    return {"gpu": result.hardware, "copy_gb_s": result.copy_bw / 1e9, "read_stream_gb_s": result.read_bw / 1e9,
            "torch": result.versions.get("torch"),
            "triton": result.versions.get("triton"), "vllm": result.vllm, "config": result.config,
            "engines": result.engines, "rows": result.rows,
            "philox_floor_s": {f"B={B} V={V}": seconds for (B, V), seconds in result.race_floors.items()},
            "goals": [dict(zip(GOALS_HEADER, g)) for g in goal_rows(result)] if shows_goals(result) else [],
            "latency_trees": result.latency_trees,
            "latency_goals": [dict(zip(GOALS_HEADER, g)) for g in latency_goal_rows(result)] if result.latency else []}


def record(result: BenchResult, command: str) -> dict:
    """The run as a record (``specsim.figures.records``): table ``steps`` is the table ``specsim bench``
    prints, ``kernels`` its breakdown (with ``--breakdown``); values: the copy bandwidth, and for the first
    shape each row's median ms, share of the algorithmic floor and ratio to vLLM (``slug``-named)."""
    from specsim.figures import records
    rec = records.new_record(command, hardware=result.hardware, versions=result.versions)
    rec["tables"]["steps"] = {"columns": list(HEADER), "rows": [list(map(str, cells(r))) for r in result.rows],
                              "note": note(result)}
    if shows_goals(result):
        rec["tables"]["goals"] = {"columns": list(GOALS_HEADER), "rows": [list(map(str, g)) for g in goal_rows(result)],
                                  "note": GOALS_NOTE + " " + note(result)}
    if result.kernels:
        rec["tables"]["kernels"] = {"columns": list(KERNEL_HEADER),
                                    "rows": [list(map(str, kernel_cells(k))) for k in result.kernels]}
    rec["values"] = headline_values(result)
    if result.latency:
        rec["tables"]["latency"] = {"columns": list(LATENCY_HEADER),
                                    "rows": [list(map(str, c)) for c in latency_table(result)],
                                    "note": LATENCY_NOTE + " " + note(result)}
        rec["tables"]["latency-goals"] = {"columns": list(GOALS_HEADER),
                                          "rows": [list(map(str, g)) for g in latency_goal_rows(result)],
                                          "note": LATENCY_GOALS_NOTE + " " + note(result)}
        rec["values"].update(latency_values(result))
    return rec


def note(result: BenchResult) -> str:
    """What a table's figures depend on, printed under it."""
    engines = "".join(f"; {name}: {label}" for name, label in result.engines.items())
    read = f"read stream {result.read_bw / 1e9:.0f} GB/s; " if result.read_bw else ""
    load = f"; {result.host_load}" if result.host_load else ""
    return (f"GPU {result.gpu}; device-to-device copy {result.copy_bw / 1e9:.0f} GB/s (read + write); {read}"
            f"Triton {result.config}; vllm: {result.vllm}{engines}{load}.")


def headline_values(result: BenchResult) -> dict[str, str]:
    """``copy-gb-s``, ``read-stream-gb-s`` (where measured), and per row of the first shape and dtype
    ``<row>-<mode>-ms``, ``<row>-<mode>-pct-alg-floor``,
    ``<row>-<mode>-pct-its-floor``, (where vLLM ran) ``<row>-<mode>-vs-vllm``, (where ``triton graph``
    ran) ``<row>-<mode>-vs-plain`` and (where the read stream was measured) ``<row>-<mode>-pct-read-stream``,
    as printed."""
    values = {"copy-gb-s": f"{result.copy_bw / 1e9:.0f}"}
    if result.read_bw:
        values["read-stream-gb-s"] = f"{result.read_bw / 1e9:.0f}"
    for (B, V), seconds in result.race_floors.items():
        values[f"philox-floor-b{B}-v{V}-ms"] = f"{seconds * 1e3:.4f}"
    first = result.rows[0] if result.rows else None
    for r in result.rows:
        if (r["batch"], r["K"], r["V"], r["dtype"]) != (first["batch"], first["K"], first["V"], first["dtype"]):
            continue  # (a --goals run also holds bfloat16 rows of the same shape: not the headline's)
        c = dict(zip(HEADER, cells(r)))
        key = f"{slug(r['device'])}-{r['mode']}"
        values[f"{key}-ms"] = c["median ms"]
        values[f"{key}-pct-alg-floor"] = c["% of alg floor"]
        values[f"{key}-pct-its-floor"] = c["% of its floor"]
        if "vs_vllm" in r:
            values[f"{key}-vs-vllm"] = c["vs vllm"]
        if "vs_plain" in r:
            values[f"{key}-vs-plain"] = c["vs plain"]
        if "pct_read_stream" in r:
            values[f"{key}-pct-read-stream"] = c["% of read stream"]
    return values


def slug(label: str) -> str:
    """A row's label as a record key.

    >>> slug("triton graph"), slug("vllm §12 (served)"), slug("triton filters torch.topk")
    ('triton-graph', 'vllm-s12-served', 'triton-filters-torch.topk')
    """
    return re.sub(r"[^a-z0-9.]+", "-", label.lower().replace("§", "s")).strip("-")


# --- the goals: each goal's rows, met or not, and the bound that explains the gap ------------

@dataclass(frozen=True)
class Goal:
    """A goal for one row label of ``specsim bench``, on the rows whose fields match ``where`` (``batch``,
    ``K``, ``V``, ``dtype``, ``mode``; a field not named: any). ``kind``:

    * ``"ratio"``: its ``vs plain`` at most ``target``;
    * ``"floor"``: its share of its own floor at least ``target`` percent — for point proposals, the floor with
      the race's instruction bound where the run measured it (``race_floor_s``);
    * ``"stream"``: its ``% of read stream`` at least ``target``;
    * ``"over"``: its median over the median of row ``base`` of the same shape at most ``target``.

    ``elsewhere``: the command that measures a goal no ``specsim bench`` row measures; ``base``: what a
    ratio goal's row is set against (for ``"over"``, that row's label)."""

    what: str
    row: str | None
    kind: str
    target: float
    where: dict
    elsewhere: str | None = None
    base: str = "triton graph"


ANCHOR = dict(batch=256, K=4, V=128256, dtype="float32")
GOALS = (
    Goal("§12, no filters", "triton §12", "floor", 90, ANCHOR),
    Goal("top-k 50, top-p 0.9 (graph)", "triton filters", "ratio", 1.5, ANCHOR),
    Goal("top-k 50, top-p 0.9 eager (eager = graph)", "triton filters eager", "ratio", 1.5, ANCHOR),
    Goal("§12 + filters", "triton §12+filters", "ratio", 1.8, ANCHOR),
    Goal("bfloat16 logits", "triton graph", "floor", 85, dict(ANCHOR, dtype="bfloat16")),
    Goal("point proposals at V = 32000", "triton graph", "floor", 85, dict(V=32000, dtype="float32", mode="point")),
    Goal("plain step, draft probabilities", "triton graph", "stream", 90, dict(ANCHOR, mode="draft")),
    Goal("point proposals", "triton graph", "floor", 85, dict(ANCHOR, mode="point")),
    Goal("top-k 50, top-p 0.9: eager within 10% of graph", "triton filters eager", "over", 1.1, ANCHOR,
         base="triton filters"),
    Goal("tree step, 64 nodes of depth 6", None, "ratio", 1.3, dict(batch=64, V=128256, dtype="float32"),
         elsewhere="python -m specsim.bench.trees --device triton --kernel --batch 64 --vocab 128256 "
                   "--depth 6 --branch 4 --width 3", base="a chain step of as many rows"),
)
"""The verification step's goals (fp32 unless named): each a row against ``triton graph`` of its shape, its own
floor, the read stream or another row."""

GOALS_HEADER = ("what", "row", "shape", "now", "goal", "met", "bound")
GOALS_NOTE = ("Each measured goal's row at its shape; bound: the bytes its inputs need read once (its own "
              "floor, workloads.row_floor_bytes) beside the plain step's, and the bandwidth it achieved over "
              "them against the device-to-device copy measured in the same run; for a ratio goal, its floor's "
              "time at that copy bandwidth over the base row's measured time (above the goal: no "
              "implementation meets it). A point-proposal row's floor also holds the race's instruction bound where "
              "the run measured it: the target rows at that bandwidth, then the rest of its bytes or the race's "
              "Philox counters alone (floors.philox_floor), whichever takes longer.")
NOT_MEASURED = "not measured in this run"


def shows_goals(result: BenchResult) -> bool:
    """Whether a run prints (and records) the goals table: with ``--sampler all``, or where a goal was measured."""
    return result.sampler == "all" or any(not g[5].startswith(NOT_MEASURED) for g in goal_rows(result))


def goal_rows(result: BenchResult) -> list[tuple]:
    """One row of ``GOALS_HEADER`` per goal and matching row of ``result``; a goal no row matches: one row
    saying it was not measured in this run (and by which command, where ``specsim bench`` does not)."""
    out = []
    for goal in GOALS:
        matched = [r for r in result.rows if r["device"] == goal.row
                   and all(r[key] == value for key, value in goal.where.items())]
        for r in matched:
            cells_ = goal_cells(goal, r, result)
            profiled = kernel_bound(r, result.kernels, result.read_bw)
            out.append(cells_[:-1] + (f"{cells_[-1]}; {profiled}",) if profiled else cells_)
        if goal.row is None and result.trees:
            out += [tree_goal_cells(goal, t) for t in result.trees]
            continue
        if not matched:
            how = f"measured by {goal.elsewhere}" if goal.elsewhere else "-"
            out.append((goal.what, goal.row or "-", where_text(goal.where), "-", goal_text(goal), NOT_MEASURED, how))
    return out


PROFILED = {"triton graph": "triton", "triton eager": "triton"}
"""A goal row's label → its breakdown's (the plain step's graph and eager rows run the plain kernels)."""
FIRST_PASSES = ("stats_kernel", "fused_stats_kernel", "lane_top_kernel", "process_kernel")
"""The kernels that read every target row once: the pass whose bytes are known, so whose share of the read
stream a profile states."""


def kernel_bound(r: dict, kernels: list, read_bw: float) -> str:
    """From a run's breakdown (``--breakdown``): the device time of each kernel of row ``r``'s step and, for its
    pass over every target row (``FIRST_PASSES``), that pass's share of the read stream over the rows' bytes,
    and the other kernels' share over the rest of the row's own floor; ``""`` where the run has no breakdown of
    the row or no read stream.

    >>> r = dict(device="triton graph", batch=2, K=1, V=1000, mode="draft", dtype="float32", floor_mb=0.024)
    >>> kernel_bound(r, [dict(device="triton", batch=2, K=1, V=1000, mode="draft", dtype="float32",
    ...                       seconds={"stats_kernel": 2e-6, "step_kernel": 1e-5})], 8e9)
    'kernels: stats 0.002 ms, step 0.010 ms; the pass over every target row (0.016 MB) at 100% of the read stream, the others over the rest of its floor (0.008 MB) at 10%'
    """
    label = PROFILED.get(r["device"], r["device"])
    found = next((k for k in kernels if k["device"] == label and all(k.get(f, r[f]) == r[f] for f in
                                                                         ("batch", "K", "V", "mode", "dtype"))), None)
    if found is None or not read_bw:
        return ""
    seconds = {n: t for n, t in found["seconds"].items() if t > 0 and n != "other"}
    text = "kernels: " + ", ".join(f"{n.replace('_kernel', '')} {t * 1e3:.3f} ms" for n, t in seconds.items())
    first = [n for n in seconds if n in FIRST_PASSES]
    if not first:
        return text
    rows_bytes = target_rows_bytes(r)
    first_s = sum(seconds[n] for n in first)
    rest_s = sum(t for n, t in seconds.items() if n not in first)
    rest_bytes = r["floor_mb"] * 1e6 - rows_bytes
    text += (f"; the pass over every target row ({rows_bytes / 1e6:.3g} MB) at "
             f"{100 * rows_bytes / read_bw / first_s:.0f}% of the read stream")
    if rest_s > 0 and rest_bytes > 0:
        text += (f", the others over the rest of its floor ({rest_bytes / 1e6:.3g} MB) at "
                 f"{100 * rest_bytes / read_bw / rest_s:.0f}%")
    return text


def goal_cells(goal: Goal, r: dict, result: BenchResult) -> tuple:
    """One measured goal: its row's value now, met or not, and the bound (its floor and bandwidth)."""
    copy_bw = result.copy_bw
    shape = shape_text(shape_of(r))
    bound = (f"{r['floor_mb']:.0f} MB at its floor ({r['floor_mb'] / r['alg_floor_mb']:.2f}x plain's "
             f"{r['alg_floor_mb']:.0f} MB); {r['gb_s']:.0f} of {copy_bw / 1e9:.0f} GB/s copy")
    if goal.kind == "ratio":
        if "vs_plain" not in r:
            return (goal.what, goal.row, shape, "-", goal_text(goal), f"{NOT_MEASURED} (no triton graph row)", bound)
        now, met = beside(r["vs_plain"], goal.target, 2, "x"), r["vs_plain"] <= goal.target
        bound += f"; its floor alone is {floor_ratio(r, copy_bw):.2f}x {goal.base}'s time"
    elif goal.kind == "stream":
        if "pct_read_stream" not in r:
            return (goal.what, goal.row, shape, "-", goal_text(goal), f"{NOT_MEASURED} (no read stream)", bound)
        now, met = beside(r["pct_read_stream"], goal.target, 0, "%"), r["pct_read_stream"] >= goal.target
    elif goal.kind == "over":
        base = next((b for b in result.rows if b["device"] == goal.base and shape_of(b) == shape_of(r)), None)
        if base is None:
            return (goal.what, goal.row, shape, "-", goal_text(goal), f"{NOT_MEASURED} (no {goal.base} row)", bound)
        ratio = r["median_ms"] / base["median_ms"]
        now, met = beside(ratio, goal.target, 2, "x"), ratio <= goal.target
        bound = f"{r['median_ms']:.3f} ms against {goal.base}'s {base['median_ms']:.3f} ms"
    else:
        pct = r["pct_floor"]
        philox = result.race_floors.get((r["batch"], r["V"])) if r["mode"] == "point" else None
        if philox is not None:
            floor_s = race_floor_s(r, copy_bw, philox)
            pct = 100 * floor_s / (r["median_ms"] * 1e-3)
            bound += (f"; the race's Philox alone {philox * 1e3:.4f} ms (floors.philox_floor): its floor with it "
                      f"{floor_s * 1e3:.3f} ms, {r['pct_floor']:.0f}% of the bytes' alone")
        now, met = beside(pct, goal.target, 0, "%"), pct >= goal.target
    return goal.what, goal.row, shape, now, goal_text(goal), "met" if met else "not met", bound


def race_floor_s(r: dict, copy_bw: float, philox_s: float) -> float:
    """Row ``r``'s floor with the race's instruction bound, seconds: its target rows at ``copy_bw`` (the first
    pass, which the race needs done: the emission row's statistics), then the rest of its floor bytes at
    ``copy_bw`` or the race's Philox counters alone (``philox_s``), whichever takes longer.

    >>> r = dict(batch=256, K=4, V=128256, dtype="float32", floor_mb=788.0)
    >>> round(race_floor_s(r, 4.278e12, 0.0345e-3) * 1e3, 4), round(race_floor_s(r, 4.278e12, 0.01e-3) * 1e3, 4)
    (0.188, 0.1842)
    """
    rows_bytes = target_rows_bytes(r)
    rest_bytes = max(0.0, r["floor_mb"] * 1e6 - rows_bytes)
    return rows_bytes / copy_bw + max(rest_bytes / copy_bw, philox_s)


ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
"""Bytes an entry of logits of each dtype name."""


def target_rows_bytes(r: dict) -> int:
    """Bytes of row ``r``'s target logits, every row once: ``batch × (K + 1) × V`` entries of its dtype (what the
    pass over every target row reads; ``kernel_bound``, ``race_floor_s``).

    >>> target_rows_bytes(dict(batch=256, K=4, V=128256, dtype="bfloat16"))
    328335360
    """
    return r["batch"] * (r["K"] + 1) * r["V"] * ITEMSIZE[r["dtype"]]


def floor_ratio(r: dict, copy_bw: float) -> float:
    """Row ``r``'s own floor time (its floor bytes at ``copy_bw`` bytes/s) over the time of the row its
    ``vs_plain`` is set against: above a ratio goal, no implementation of the row can meet it.

    >>> round(floor_ratio(dict(floor_mb=1200.0, median_ms=0.5, vs_plain=1.5), 3e12), 2)
    1.2
    """
    return r["floor_mb"] / copy_bw * 1e9 / (r["median_ms"] / r["vs_plain"])


def tree_goal_cells(goal: Goal, t: dict) -> tuple:
    """The tree goal from ``measure_goals``' kernel timings ``t``: the tree kernel over the chain kernels
    reading as many target rows; the bound is the chain's time (every row read once, at the plain step's
    bandwidth) beside the tree's.

    >>> tree_goal_cells(GOALS[-1], dict(variant="accepted to depth", batch=64, V=128256, chain_ms=0.8,
    ...                                 tree_ms=1.0, accepted=5.9))[3:6]
    ('1.25x', '≤ 1.30x a chain step of as many rows', 'met')
    """
    ratio = t["tree_ms"] / t["chain_ms"]
    shape = f"B={t['batch']} V={t['V']} depth {TREE_GOAL['depth']} branch {TREE_GOAL['branch']} width {TREE_GOAL['width']}"
    return (goal.what, f"tree kernel, {t['variant']}", shape,
            beside(ratio, goal.target, 2, "x"), goal_text(goal), "met" if ratio <= goal.target else "not met",
            f"tree kernel {t['tree_ms']:.3f} ms (mean accepted {t['accepted']:.2f}) against the chain kernels "
            f"at K = N {t['chain_ms']:.3f} ms (every target row read once)")


GOAL_RUNS = (
    dict(batch=[256], k=[4], vocab=[128256], dtype="float32", modes=["draft", "point"], sampler="all"),
    dict(batch=[256], k=[4], vocab=[128256], dtype="bfloat16", modes=list(MODES), sampler="off", devices=["triton"]),
    dict(batch=[512], k=[8], vocab=[32000], dtype="float32", modes=["point"], sampler="off", devices=["triton"]),
)
"""The shapes ``measure_goals`` times: the anchor with every §12 row (the devices asked for, the field's
among them), then bfloat16 logits and point proposals at V = 32000 on the Triton device."""
TREE_GOAL = dict(batch=64, vocab=128256, depth=6, branch=4, width=3)
"""The tree goal's shape (``specsim.bench.trees --kernel``'s arguments)."""


def measure_goals(torch, opts: Options, out=print) -> BenchResult:
    """Every goal of ``GOALS`` in one run (``specsim bench --goals``): ``measure`` at each of ``GOAL_RUNS``
    (``opts``' reps, warm-up and breakdown; its shapes replaced), then the tree goal's kernels
    (``specsim.bench.trees.bench_kernels`` on the compiled Triton device at ``TREE_GOAL``). One result:
    every run's rows and breakdowns, the first run's hardware, copy bandwidth and field engines."""
    from dataclasses import replace as with_
    runs = [measure(torch, with_(opts, **run), out) for run in GOAL_RUNS]
    result = runs[0]
    for more in runs[1:]:
        result.rows += more.rows
        result.kernels += more.kernels
        result.race_floors.update(more.race_floors)
    result.trees = tree_timings(TREE_GOAL, opts, "tree goal", out)
    return result


def goal_text(goal: Goal) -> str:
    """``≤ 1.50x triton graph``, ``≥ 85% of its floor``, ``≥ 90% of the read stream`` or ``≤ 1.10x triton filters``.

    >>> [goal_text(g) for g in (GOALS[1], GOALS[4], GOALS[6], GOALS[8], GOALS[-1])]
    ['≤ 1.50x triton graph', '≥ 85% of its floor', '≥ 90% of the read stream', '≤ 1.10x triton filters', '≤ 1.30x a chain step of as many rows']
    """
    if goal.kind in ("ratio", "over"):
        return f"≤ {goal.target:.2f}x {goal.base}"
    return f"≥ {goal.target:.0f}% of {'the read stream' if goal.kind == 'stream' else 'its floor'}"


def where_text(where: dict) -> str:
    """A goal's shape as ``B=256 K=4 V=128256 float32`` (the fields it names).

    >>> where_text(dict(V=32000, dtype="float32", mode="point"))
    'V=32000 float32 point'
    """
    names = dict(batch="B=", K="K=", V="V=", dtype="", mode="")
    return " ".join(f"{names[k]}{v}" for k, v in where.items()) or "-"


# --- small batches (--latency): each row against its measured floor, and the latency goals ----------

LATENCY_DEVICES = ("triton", "vllm", "vllm-v2")
LATENCY_RUN = dict(batch=[1, 8, 32, 256], k=[4], vocab=[128256], dtype="float32", modes=["draft", "point"],
                   sampler="off", no_graph=False, no_launches=True, device_time=True)
"""The shapes ``measure_latency`` times: the batch sizes of real decoding up to the anchor's, K = 4,
V = 128256, float32, draft and point, the ``triton graph`` and ``triton eager`` rows (no ``triton
launches``) beside vLLM's V1 sampler and Model Runner V2 where they load."""
LATENCY_TREE = dict(TREE_GOAL, batch=8)
"""The tree kernel of the latency run: the tree goal's tree (64 nodes of depth 6) at batch 8."""
ROW_LAUNCHES = {"triton graph": 2, "triton eager": 2, "triton launches": 2}
"""Launches per step of each row whose launches are known: the plain Triton step's two
(``floors.PLAIN_STEP_LAUNCHES``); every other row is held to one launch (any step makes at least one)."""
LATENCY_HEADER = ("device", "batch", "K", "V", "mode", "median ms", "launches", "launch floor ms",
                  "floor MB", "one pass ms", "floor ms", "bound", "% of floor", "% of alg floor",
                  "% of read stream", "vs vllm v2", "device ms", "device floor ms")
"""``launch floor``: ``floors.launch_floor`` of the row's launches; ``one pass``: ``floors.read_stream`` of its
floor bytes; ``floor``: ``floors.row_bound`` of the two, ``bound`` the term that dominates it
(``launches``, ``one pass``, ``bytes``); ``% of floor``: floor over the median; ``% of alg floor``: the
plain step's bytes over the copy bandwidth, over the median (as ``HEADER``); ``% of read stream``: its floor
bytes over the read stream, over the median; ``vs vllm v2``: the median over the same shape's ``vllm v2``;
``device ms``: the row on the device alone (``harness.time_queued``: its submission hidden, as inside an engine's
captured step), ``device floor ms``: its floor measured the same way (``floors.row_bound`` of the queued launches
and pass)."""
LATENCY_NOTE = ("Each row against its measured floor: a CUDA graph of as many empty launches as the row makes "
                "(the plain Triton step: two, stats and step; any other row: one, the least any step makes), "
                "and one read-only pass over its floor bytes, both timed in this run as the rows are; floor = "
                "the pass plus the other launches, never below the launches alone. Device ms and device floor "
                "ms: the row and its floor on the device alone, each call queued behind a sleeping kernel so "
                "that its submission (a graph's launch from the host) is hidden. Tree rows: the tree "
                "kernel at batch 8 against the chain kernels reading as many target rows.")
LATENCY_GOAL_MS = 0.010
"""B = 1: the graphed step within two launches' worth."""
EAGER_GAP_MS = 0.005
"""Eager within this of the graph at every batch size."""
BYTES_GOAL_BATCH, BYTES_GOAL_PCT = 32, 80
"""B = 32: at least this share of the bytes' floor (over the copy bandwidth, and over the read stream)."""
LATENCY_GOALS_NOTE = ("The latency goals: B = 1 graphed within two launches' worth; eager within a few "
                      "microseconds of the graph; B = 32 at the bytes' floor (over the copy bandwidth and over "
                      "the read stream); the graphed step ahead of vLLM's Model Runner V2 at every batch size. "
                      "Bound: the row's measured floor (launches, one pass over its bytes, its bytes) and what "
                      "it allows; a goal beyond the measured floor is out of reach for any implementation.")


def measure_latency(torch, opts: Options, out=print) -> BenchResult:
    """``specsim bench --latency``: ``measure`` at ``LATENCY_RUN`` (``opts``' reps and warm-up; the devices
    of ``opts`` among ``LATENCY_DEVICES``), the tree kernel at ``LATENCY_TREE`` on the compiled Triton
    device (``specsim.bench.trees.bench_kernels``), then each row's measured floor (``floors``)."""
    from dataclasses import replace as with_

    from specsim.bench import floors
    devices = [d for d in opts.devices if d in LATENCY_DEVICES]
    result = measure(torch, with_(opts, **LATENCY_RUN, devices=devices), out)
    result.latency = True
    if "triton" in devices:
        result.latency_trees = tree_timings(LATENCY_TREE, opts, "latency tree", out)
        torch.cuda.empty_cache()
    add_bounds(result.rows, lambda n: floors.launch_floor(torch, n, opts.reps, opts.warmup),
               lambda nbytes: floors.read_stream(torch, nbytes, opts.reps, opts.warmup), result.read_bw,
               lambda n: floors.launch_floor(torch, n, opts.reps, opts.warmup, queued=True),
               lambda nbytes: floors.read_stream(torch, nbytes, opts.reps, opts.warmup, queued=True))
    for r in result.rows:
        out(f"{r['device']} B={r['batch']} {r['mode']}: {r['median_ms']:.3f} ms, floor {r['floor_ms']:.3f} ms "
            f"({r['bound']})", flush=True)
    return result


def tree_timings(g: dict, opts: Options, what: str, out=print) -> list[dict]:
    """The tree kernel at ``g`` (``TREE_GOAL``'s keys) on the compiled Triton device, both variants
    (``specsim.bench.trees.bench_kernels``): one dict each, ``variant``, ``batch``, ``V``, ``nodes``,
    ``chain_ms`` (the chain kernels at K = N), ``tree_ms``, ``accepted``; a line each through ``out``."""
    from devices.triton_device import make_device
    from specsim.bench.trees import bench_kernels, tree_parents
    parents = tree_parents(g["depth"], g["branch"], g["width"])
    timed = bench_kernels(make_device(), g["batch"], g["vocab"], parents, opts.warmup, max(5, opts.reps // 10))
    found = []
    for variant in ("rejected at root", "accepted to depth"):
        found.append(dict(variant=variant, batch=g["batch"], V=g["vocab"], nodes=len(parents),
                          chain_ms=timed["chain K=N"], tree_ms=timed[f"tree kernel, {variant}"],
                          accepted=timed.get(f"tree kernel, {variant} accepted", 0.0)))
        out(f"{what}, {variant}: tree kernel {found[-1]['tree_ms']:.3f} ms, chain kernels K=N "
            f"{timed['chain K=N']:.3f} ms", flush=True)
    return found


def add_bounds(rows: list[dict], launch_s, pass_s, read_bw: float, device_launch_s=None, device_pass_s=None) -> None:
    """Each row's measured floor into it: ``launches`` (``ROW_LAUNCHES``, else 1), ``launch_ms``
    (``launch_s(launches)``), ``pass_ms`` (``pass_s(its floor bytes)``), ``floor_ms`` and ``bound``
    (``floors.row_bound`` with ``launch_s(1)`` and the bytes over ``read_bw``), ``pct_latency_floor``; and
    ``vs_v2``, the median over the same shape's ``vllm v2`` where it ran. ``launch_s(n)`` and
    ``pass_s(nbytes)`` are seconds (``floors.launch_floor``, ``floors.read_stream``); with ``device_launch_s``
    and ``device_pass_s`` (the same, queued: the device alone) a row timed on the device (``device_ms``) also
    gets ``device_floor_ms`` and ``device_launch_ms``."""
    from specsim.bench import floors
    if not read_bw > 0:
        raise ValueError(f"add_bounds: read_bw must be the measured read stream in bytes/s (> 0), got {read_bw!r}")
    def floor(launch_s, pass_s, launches: int, nbytes: int) -> tuple:
        """``(launched, passed, seconds, what)``: the row's launches, its pass and its floor (``floors.row_bound``)."""
        one, passed = launch_s(1), pass_s(nbytes)
        # L launches are measured apart from one; where the two medians land within their noise (a graph of two
        # empty launches timed below one), the floor of L launches is the one launch's
        launched = max(launch_s(launches), one)
        return (launched, passed) + floors.row_bound(launched, one, passed, nbytes / read_bw)

    for r in rows:
        launches = ROW_LAUNCHES.get(r["device"], 1)
        nbytes = round(r["floor_mb"] * 1e6)
        launched, passed, seconds, what = floor(launch_s, pass_s, launches, nbytes)
        r.update(launches=launches, launch_ms=launched * 1e3, pass_ms=passed * 1e3, floor_ms=seconds * 1e3,
                 bound=what, pct_latency_floor=100 * seconds * 1e3 / r["median_ms"])
        if "device_ms" in r and device_launch_s is not None and device_pass_s is not None:
            launched, _, seconds, _ = floor(device_launch_s, device_pass_s, launches, nbytes)
            r.update(device_launch_ms=launched * 1e3, device_floor_ms=seconds * 1e3)
    v2 = {shape_of(r): r["median_ms"] for r in rows if r["device"] == "vllm v2"}
    for r in rows:
        if shape_of(r) in v2:
            r["vs_v2"] = r["median_ms"] / v2[shape_of(r)]


def shape_of(r: dict) -> tuple:
    """A row's shape: ``(batch, K, V, mode, dtype)``."""
    return r["batch"], r["K"], r["V"], r["mode"], r["dtype"]


def latency_cells(r: dict) -> tuple:
    """One row of ``LATENCY_HEADER`` from a row of a ``--latency`` run (``add_bounds`` filled in)."""
    known = r["device"] in ROW_LAUNCHES
    return (r["device"], r["batch"], r["K"], r["V"], r["mode"], f"{r['median_ms']:.3f}",
            str(r["launches"]) if known else f"≥ {r['launches']}", f"{r['launch_ms']:.4f}", f"{r['floor_mb']:.1f}",
            f"{r['pass_ms']:.4f}", f"{r['floor_ms']:.4f}", r["bound"], f"{r['pct_latency_floor']:.0f}%",
            f"{r['pct_alg_floor']:.0f}%", f"{r['pct_read_stream']:.0f}%" if "pct_read_stream" in r else "-",
            f"{r['vs_v2']:.2f}x" if "vs_v2" in r else "-", f"{r['device_ms']:.4f}" if "device_ms" in r else "-",
            f"{r['device_floor_ms']:.4f}" if "device_floor_ms" in r else "-")


def tree_latency_cells(t: dict) -> tuple:
    """A tree row of the latency table: the tree kernel's median, its floor columns empty (it reads only the
    rows it visits), its bound the chain kernels reading as many target rows.

    >>> c = tree_latency_cells(dict(variant="rejected at root", batch=8, V=128256, nodes=64, chain_ms=0.2,
    ...                             tree_ms=0.05, accepted=0.0))
    >>> c[0], c[5], c[10], c[11]
    ('tree kernel, rejected at root', '0.050', '-', '0.25x the chain kernels at K = N (0.200 ms)')
    """
    return (f"tree kernel, {t['variant']}", t["batch"], t["nodes"], t["V"], "point", f"{t['tree_ms']:.3f}",
            "-", "-", "-", "-", "-", f"{t['tree_ms'] / t['chain_ms']:.2f}x the chain kernels at K = N "
            f"({t['chain_ms']:.3f} ms)", "-", "-", "-", "-", "-", "-")


def latency_table(result: BenchResult) -> list[tuple]:
    """The latency table's rows: each measured row (``latency_cells``), then the tree rows."""
    return [latency_cells(r) for r in result.rows] + [tree_latency_cells(t) for t in result.latency_trees]


def latency_values(result: BenchResult) -> dict[str, str]:
    """Per row of the latency table, ``latency-<row>-<mode>-b<batch>-ms`` and ``…-pct-floor``, and where the row
    was timed on the device alone ``…-device-ms`` and ``…-device-floor-ms``, as printed."""
    values = {}
    for r in result.rows:
        c = dict(zip(LATENCY_HEADER, latency_cells(r)))
        key = f"latency-{slug(r['device'])}-{r['mode']}-b{r['batch']}"
        values[f"{key}-ms"], values[f"{key}-pct-floor"] = c["median ms"], c["% of floor"]
        if "device_ms" in r:
            values[f"{key}-device-ms"] = c["device ms"]
        if "device_floor_ms" in r:
            values[f"{key}-device-floor-ms"] = c["device floor ms"]
    return values


def latency_goal_rows(result: BenchResult) -> list[tuple]:
    """The latency goals as rows of ``GOALS_HEADER``: B = 1 graphed, eager's gap to the graph at each batch,
    B = 32's share of the bytes' floor (copy and read stream), the graph against vLLM's V2 at each batch;
    each met or not with its measured bound, or not measured in this run (and why)."""
    shapes = {}
    for r in result.rows:
        shapes.setdefault(shape_of(r), {})[r["device"]] = r
    return (graph_time_goals(shapes) + eager_gap_goals(shapes) + bytes_goals(shapes)
            + v2_goals(shapes, result.engines.get("vllm v2", "vllm-v2 not asked for")))


def shape_text(shape: tuple) -> str:
    """``B=1 K=4 V=128256 draft float32``."""
    return "B={} K={} V={} {} {}".format(*shape)


def floor_text(r: dict) -> str:
    """A row's measured floor as a goal's bound.

    >>> floor_text(dict(floor_ms=0.0121, bound="one pass", launches=2, launch_ms=0.0071, floor_mb=3.6,
    ...                 pass_ms=0.0085, pct_latency_floor=71.2))
    'floor 0.0121 ms (one pass): 2 launches 0.0071 ms, one pass over 3.6 MB 0.0085 ms; 71% of it'
    """
    return (f"floor {r['floor_ms']:.4f} ms ({r['bound']}): {r['launches']} launches {r['launch_ms']:.4f} ms, "
            f"one pass over {r['floor_mb']:.1f} MB {r['pass_ms']:.4f} ms; {r['pct_latency_floor']:.0f}% of it")


def graph_time_goals(shapes: dict) -> list[tuple]:
    """B = 1: ``triton graph`` at most ``LATENCY_GOAL_MS`` — on the device alone where the row was timed so
    (``device_ms`` against ``device_floor_ms``: inside an engine's captured step no graph is launched from
    the host for the verification), else as replayed; a measured floor above it says no step of as many
    launches reading as many bytes meets it."""
    what, goal = "B = 1, graphed", f"≤ {LATENCY_GOAL_MS:.3f} ms"
    out = []
    for shape, rows in shapes.items():
        r = rows.get("triton graph")
        if shape[0] != 1 or r is None:
            continue
        now, floor = r["median_ms"], r["floor_ms"]
        bound = floor_text(r)
        if "device_floor_ms" in r:
            now, floor = r["device_ms"], r["device_floor_ms"]
            bound = (f"device time (submission hidden) {now:.4f} ms against its device floor {floor:.4f} ms "
                     f"({r['launches']} empty launches {r['device_launch_ms']:.4f} ms, one pass over "
                     f"{r['floor_mb']:.1f} MB); replayed from the host {r['median_ms']:.4f} ms against {floor_text(r)}")
        if floor > LATENCY_GOAL_MS:
            bound += "; the measured floor alone is above the goal: out of reach"
        out.append((what, "triton graph", shape_text(shape), beside(now, LATENCY_GOAL_MS, 3, " ms"), goal,
                    met(now <= LATENCY_GOAL_MS), bound))
    return out or [(what, "triton graph", "B=1", "-", goal, NOT_MEASURED, "-")]


def eager_gap_goals(shapes: dict) -> list[tuple]:
    """At each batch and mode: ``triton eager`` at most ``EAGER_GAP_MS`` above ``triton graph``."""
    what, goal = "eager = graph", f"≤ {EAGER_GAP_MS:.3f} ms over triton graph"
    out = []
    for shape, rows in shapes.items():
        graph, eager = rows.get("triton graph"), rows.get("triton eager")
        if graph is None or eager is None:
            continue
        gap = eager["median_ms"] - graph["median_ms"]
        bound = (f"eager {eager['median_ms']:.3f} ms, graph {graph['median_ms']:.3f} ms, both over "
                 f"{floor_text(graph)}")
        out.append((what, "triton eager", shape_text(shape), beside(gap, EAGER_GAP_MS, 3, " ms", "+"), goal,
                    met(gap <= EAGER_GAP_MS), bound))
    return out or [(what, "triton eager", "-", "-", goal, NOT_MEASURED, "-")]


def bytes_goals(shapes: dict) -> list[tuple]:
    """B = ``BYTES_GOAL_BATCH``: ``triton graph`` at ``BYTES_GOAL_PCT``% or more of the bytes' floor, over the
    copy bandwidth (``% of alg floor``) and over the read stream; the bound says the most the measured
    floor allows."""
    out = []
    for shape, rows in shapes.items():
        r = rows.get("triton graph")
        if shape[0] != BYTES_GOAL_BATCH or r is None:
            continue
        for over, key in (("copy", "pct_alg_floor"), ("read stream", "pct_read_stream")):
            if key not in r:
                continue
            allowed = r[key] * r["median_ms"] / r["floor_ms"]   # the share at the measured floor's time
            bound = f"{floor_text(r)}; at its floor the step would be {allowed:.0f}% of this bytes' floor"
            if allowed < BYTES_GOAL_PCT:
                bound += ": out of reach"
            out.append((f"B = {BYTES_GOAL_BATCH}, bytes' floor over the {over}", "triton graph", shape_text(shape),
                        beside(r[key], BYTES_GOAL_PCT, 0, "%"), f"≥ {BYTES_GOAL_PCT}% of the bytes' floor",
                        met(r[key] >= BYTES_GOAL_PCT),
                        bound))
    return out or [(f"B = {BYTES_GOAL_BATCH}, bytes' floor", "triton graph", f"B={BYTES_GOAL_BATCH}", "-",
                    f"≥ {BYTES_GOAL_PCT}% of the bytes' floor", NOT_MEASURED, "-")]


def v2_goals(shapes: dict, v2_label: str) -> list[tuple]:
    """At each batch and mode: ``triton graph`` faster than vLLM's Model Runner V2 (``vllm v2``), as each is
    called (the graph replayed, V2 called eagerly from Python); and where both were timed on the device alone,
    again on device time (``…, device time``): V2's eager call is mostly its host's time at small batches, so
    that row says what is left once an engine hides it. Where V2 has no row, not measured, with why
    (``v2_label``: the engine's label or the reason it is absent)."""
    what, goal = "ahead of vLLM Model Runner V2", "< 1.00x vllm v2"
    out, on_device = [], []
    for shape, rows in shapes.items():
        r, v2 = rows.get("triton graph"), rows.get("vllm v2")
        if r is None:
            continue
        if v2 is None:
            out.append((what, "triton graph", shape_text(shape), "-", goal, NOT_MEASURED, f"vllm v2: {v2_label}"))
            continue
        ratio = r["median_ms"] / v2["median_ms"]
        out.append((what, "triton graph", shape_text(shape), f"{ratio:.2f}x", goal, met(ratio < 1.0),
                    f"graph {r['median_ms']:.3f} ms, vllm v2 {v2['median_ms']:.3f} ms; graph's {floor_text(r)}"))
        if "device_ms" in r and "device_ms" in v2:
            ratio = r["device_ms"] / v2["device_ms"]
            on_device.append((f"{what}, device time", "triton graph", shape_text(shape), f"{ratio:.2f}x", goal,
                              met(ratio < 1.0), f"on the device alone: graph {r['device_ms']:.4f} ms, vllm v2 "
                              f"{v2['device_ms']:.4f} ms (called from Python {v2['median_ms']:.3f} ms)"))
    return (out or [(what, "triton graph", "-", "-", goal, NOT_MEASURED, f"vllm v2: {v2_label}")]) + on_device


def met(ok: bool) -> str:
    """A goal row's ``met`` cell."""
    return "met" if ok else "not met"


def beside(value: float, target: float, places: int, suffix: str = "", sign: str = "") -> str:
    """A goal row's ``now`` cell: ``value`` at ``places`` decimals, or one more where that rounds it to the goal's
    ``target`` (an 89.6% must not read "90%" beside a goal of 90%, nor a met 90.04% the same as a missed one).

    >>> beside(89.6, 90, 0, "%"), beside(86.2, 85, 0, "%"), beside(0.0104, 0.010, 3, " ms"), beside(1.804, 1.8, 2, "x")
    ('89.6%', '86%', '0.0104 ms', '1.804x')
    """
    text = f"{value:{sign}.{places}f}"
    if text == f"{target:{sign}.{places}f}":
        text = f"{value:{sign}.{places + 1}f}"
    return text + suffix
