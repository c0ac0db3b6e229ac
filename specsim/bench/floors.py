"""Measured floors of a step on the GPU: what any implementation with as many launches, reading as many
bytes, pays on this GPU in this run (``specsim bench``'s latency columns, ``--latency``).

Two measurements of bytes and launches, each a CUDA graph replayed and timed as ``harness`` times every row (CUDA events
around each replay, warm-up first, the median), or with ``queued`` as the rows' device time is timed
(``harness.time_queued``: the replay's submission hidden):

* ``launch_floor(torch, L)`` — a graph of ``L`` back-to-back launches of a kernel that stores one float
  (``floor_kernels.empty_kernel``) on one stream: what L dependent launches cost with no work in them;
* ``read_stream(torch, nbytes)`` — a graph of one read-only reduction over ``nbytes`` of float32
  (``floor_kernels.read_kernel``: grid-stride over many programs, one float written per program), so
  ``nbytes / t`` is the read-stream bandwidth (``read_bandwidth``, at 2 GiB) and, at a row's size, ``t``
  is the latency of one pass over that many bytes at full parallelism.

and one of instructions, ``philox_floor(torch, batch, V)`` — the keyed race's Philox counters alone, timed on the
device (``specsim bench``'s goals read it as the race's instruction bound for point proposals).

``row_bound`` combines the first two into one row's floor (pure arithmetic, stated there). Each measurement is
kept per size for the rest of the process: a run's rows of one shape share their floors.

The plain Triton step is two launches for draft, point and greedy alike (``devices.triton_device
.step_tensors`` without a sampler or a cut: ``stats_kernel`` then ``step_kernel``; its three
``torch.empty`` allocations launch no kernel): ``PLAIN_STEP_LAUNCHES``.
"""

from __future__ import annotations

PLAIN_STEP_LAUNCHES = 2
"""Launches of the plain Triton step (``verify_tensors`` with no sampler or cut): statistics, step."""
READ_BLOCK = 4096
"""float32 elements each program of ``read_kernel`` loads per iteration (16 per thread at 8 warps)."""
READ_WARPS = 8
PROGRAMS_PER_SM = 4
"""Programs of ``read_kernel`` per SM at most: enough resident warps to keep every SM's loads in flight."""
PHILOX_QUADS, PHILOX_WARPS, PHILOX_PROGRAMS_PER_SM = 256, 4, 32
"""``philox_floor``'s tile (counters), warps and programs per SM: among the fastest of a trial on an H200 at
256 × 128256 over tiles of 64 to 512 counters, 1 to 8 warps and 8 to 64 programs an SM."""
BANDWIDTH_BYTES = 2 << 30
"""The size ``read_bandwidth`` reads: far above any L2, so its time is the memory's read stream."""

_measured: dict = {}
"""``(what, size, reps, warmup, buffers, queued)`` → seconds, for the rest of the process (``size``: launches,
bytes, or ``(batch, V)``)."""


def launch_floor(torch, launches: int, reps: int = 50, warmup: int = 5, queued: bool = False) -> float:
    """Seconds: the median replay of a CUDA graph of ``launches`` back-to-back launches of
    ``empty_kernel`` (one program storing one float) on one stream — what any implementation with that
    many dependent launches pays, graphed; ``queued``: its device time alone (``harness.time_queued``)."""
    _check_positive("launch_floor", launches=launches, reps=reps)
    key = ("launches", launches, reps, warmup, 1, queued)
    if key not in _measured:
        from specsim.bench import floor_kernels, harness
        out = torch.zeros(1, device="cuda", dtype=torch.float32)

        def launch_all(x):
            for _ in range(launches):
                floor_kernels.empty_kernel[(1,)](x)
        graph = harness.graphs(torch, launch_all, [out])[0]
        _measured[key] = harness.median(harness.time_calls(torch, lambda i: graph.replay(), reps, warmup, queued))
    return _measured[key]


def read_stream(torch, nbytes: int, reps: int = 50, warmup: int = 5, buffers: int | None = None,
                queued: bool = False) -> float:
    """Seconds: the median replay of a CUDA graph of one ``read_kernel`` pass over ``nbytes`` of float32
    (rounded up to whole floats). The replays rotate through ``buffers`` distinct buffers (default:
    as many as ``workloads.input_sets`` gives a step's rows of that size), so the pass reads from where
    a row of that size reads (memory, or L2 where the row's own input sets fit in it). ``queued``: its
    device time alone (``harness.time_queued``)."""
    _check_positive("read_stream", nbytes=nbytes, reps=reps)
    if buffers is not None:
        _check_positive("read_stream", buffers=buffers)
    from specsim.bench import workloads
    props = torch.cuda.get_device_properties(0)
    count = buffers or workloads.input_sets(getattr(props, "L2_cache_size", 50 << 20), nbytes)
    key = ("read", nbytes, reps, warmup, count, queued)
    if key not in _measured:
        _measured[key] = _time_reads(torch, -(-nbytes // 4), count, props.multi_processor_count, reps, warmup,
                                     queued)
    return _measured[key]


def _time_reads(torch, n: int, count: int, sms: int, reps: int, warmup: int, queued: bool = False) -> float:
    """The median replay of one ``read_kernel`` graph per buffer of ``n`` float32, ``count`` buffers."""
    from specsim.bench import floor_kernels, harness
    programs = read_programs(n, sms)
    sets = [(torch.empty(n, device="cuda", dtype=torch.float32).uniform_(),
             torch.empty(programs, device="cuda", dtype=torch.float32)) for _ in range(count)]

    def read(x):
        floor_kernels.read_kernel[(programs,)](x[0], x[1], n, BLOCK=READ_BLOCK, num_warps=READ_WARPS)
    graphs = harness.graphs(torch, read, sets)
    return harness.median(harness.time_calls(torch, lambda i: graphs[i % count].replay(), reps, warmup, queued))


def philox_floor(torch, batch: int, vocab: int, reps: int = 50, warmup: int = 5) -> float:
    """Seconds on the device alone (``harness.time_queued``): ``batch`` requests' ``ceil(vocab / 4)``
    Philox4x32-10 counters each, keyed per request as the race keys them (``floor_kernels.philox_kernel``:
    Triton's ``tl.philox``, ``PHILOX_QUADS`` counters a tile, about ``PHILOX_PROGRAMS_PER_SM`` programs an SM),
    nothing read. A race over keyed noise (SPEC §5.2) needs the word of every entry of positive weight — with
    point proposals every entry but the rejected draft's and those of probability 0 — so no step that races
    the emission row after its statistics beats this on this GPU with Triton's Philox."""
    _check_positive("philox_floor", batch=batch, vocab=vocab, reps=reps)
    key = ("philox", (batch, vocab), reps, warmup, 1, True)
    if key not in _measured:
        from specsim.bench import floor_kernels, harness
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        counters = -(-vocab // 4)
        chunks = max(1, min(-(-counters // PHILOX_QUADS), PHILOX_PROGRAMS_PER_SM * sms // batch))
        chunk = -(-counters // (chunks * PHILOX_QUADS)) * PHILOX_QUADS
        chunks = -(-counters // chunk)
        seeds = torch.randint(-2**62, 2**62, (batch,), device="cuda")
        out = torch.empty(batch * chunks, device="cuda", dtype=torch.int32)

        def make(i):
            floor_kernels.philox_kernel[(batch, chunks)](seeds, out, counters, chunk, chunks,
                                                         TILES=chunk // PHILOX_QUADS, QUADS=PHILOX_QUADS,
                                                         num_warps=PHILOX_WARPS)
        _measured[key] = harness.median(harness.time_calls(torch, make, reps, warmup, queued=True))
    return _measured[key]


def read_bandwidth(torch, nbytes: int = BANDWIDTH_BYTES, reps: int = 20, warmup: int = 3) -> float:
    """Bytes read per second by ``read_stream`` over ``nbytes`` (default 2 GiB): the read stream."""
    return nbytes / read_stream(torch, nbytes, reps, warmup)


def read_programs(n: int, sms: int) -> int:
    """Programs of a ``read_kernel`` pass over ``n`` floats: one per block of ``READ_BLOCK``, at most
    ``PROGRAMS_PER_SM`` per SM (each then strides over the rest).

    >>> read_programs(1, 132), read_programs(3 * 4096, 132), read_programs(1 << 29, 132)
    (1, 3, 528)
    """
    return max(1, min(-(-n // READ_BLOCK), PROGRAMS_PER_SM * sms))


def row_bound(launches_s: float, one_launch_s: float, pass_s: float, bytes_s: float) -> tuple[float, str]:
    """``(seconds, what)``: the measured floor of a row of L dependent launches reading B bytes, and the
    term that dominates it.

    ``launches_s`` is ``launch_floor(L)``, ``one_launch_s`` ``launch_floor(1)``, ``pass_s``
    ``read_stream(B)`` (one launch reading B bytes), ``bytes_s`` B over the read-stream bandwidth. The
    floor is one pass over the bytes plus the other L − 1 launches' cost,
    ``pass_s + (launches_s − one_launch_s)``, and never below ``launches_s``. ``what``: ``"launches"``
    where the pass costs no more than an empty launch (the launches alone are the floor); else
    ``"bytes"`` where the bytes at the read-stream bandwidth are at least half the pass (it is
    bandwidth-bound); else ``"one pass"`` (the pass's own latency, not its bytes, bounds it).

    >>> row_bound(8e-6, 5e-6, 4e-6, 1e-6)        # a pass cheaper than an empty launch
    (8e-06, 'launches')
    >>> [round(x * 1e6, 3) if isinstance(x, float) else x for x in row_bound(8e-6, 5e-6, 9e-6, 2e-6)]
    [12.0, 'one pass']
    >>> [round(x * 1e6, 3) if isinstance(x, float) else x for x in row_bound(8e-6, 5e-6, 300e-6, 290e-6)]
    [303.0, 'bytes']
    """
    for name, value in (("launches_s", launches_s), ("one_launch_s", one_launch_s), ("pass_s", pass_s),
                        ("bytes_s", bytes_s)):
        if not value >= 0:
            raise ValueError(f"row_bound: {name} must be a time ≥ 0 seconds, got {value!r}")
    if one_launch_s > launches_s:
        raise ValueError(f"row_bound: one_launch_s ({one_launch_s!r}) must not exceed launches_s "
                         f"({launches_s!r}): L launches cost at least one")
    if pass_s <= one_launch_s:   # (compared directly: the sum below would carry rounding)
        return launches_s, "launches"
    return pass_s + launches_s - one_launch_s, "bytes" if 2 * bytes_s >= pass_s else "one pass"


def _check_positive(where: str, **values) -> None:
    """A ``ValueError`` naming the argument unless each of ``values`` is an int ≥ 1."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{where}: {name} must be an integer ≥ 1, got {value!r}")
