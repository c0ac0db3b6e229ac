"""How a GPU step is timed: CUDA events around each call, a warm-up, the median of many calls.

Each timed call is bracketed by its own pair of CUDA events, recorded on the
stream back to back, so the median is device time per call with the host's
launch overhead included where the host is the bottleneck (an eager call, or
a graph replay whose submission takes longer than its kernels: a small step).
``time_queued`` times the device alone: each call queued behind a sleeping
kernel, so its submission is hidden. The warm-up calls compile, autotune
and fill caches outside the timing. ``graphs`` captures a step as CUDA graphs
(the kernels alone, as an engine that graphs its whole step runs them);
``kernel_times`` splits a call's device time by kernel (torch.profiler);
``copy_bandwidth`` measures the device-to-device copy the floors are set
against; ``environment`` names the hardware and versions a record carries;
``host_load`` keeps the host's CPUs busy while rows are timed (an engine's
host is seldom idle: its scheduler, tokenizer and detokenizer share it).
"""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys


def median(xs) -> float:
    """The median of ``xs`` (the mean of the middle two for an even count).

    >>> median([3.0, 1.0, 2.0]), median([4.0, 1.0, 2.0, 3.0])
    (2.0, 2.5)
    """
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


BUSY_LOOP = "while True: pass"


@contextlib.contextmanager
def host_load(processes: int):
    """``processes`` Python processes spinning on the host's CPUs while the block runs (``specsim bench
    --host-load N``), killed after it. Each takes a whole CPU where the scheduler gives it one, so with as
    many as the host has CPUs the timing process shares its CPU with them."""
    if processes < 0:
        raise ValueError(f"host_load: processes must be >= 0, got {processes}")
    spinning = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(processes)]
    try:
        yield spinning
    finally:
        for p in spinning:
            p.kill()
        for p in spinning:
            p.wait()


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity where the OS tells it, else every CPU)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


QUEUE_AHEAD_CYCLES = 2_000_000
"""GPU clock cycles ``time_queued`` keeps the stream busy before each call (about 1 ms at 2 GHz): longer than
the host takes to queue a step, so the call's kernels run back to back behind it."""


def time_calls(torch, fn, reps: int, warmup: int, queued: bool = False) -> list[float]:
    """Seconds per call of ``fn(i)``, each call timed by its own CUDA events, after ``warmup`` calls.
    Python's garbage collector is paused while the calls are queued (as ``timeit`` does): a
    collection's pause on the host is not the step's time. ``queued``: on the device alone
    (``time_queued``)."""
    import gc
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    collecting = gc.isenabled()
    gc.disable()
    try:
        for i, (start, end) in enumerate(events):
            if queued:
                torch.cuda._sleep(QUEUE_AHEAD_CYCLES)
            start.record()
            fn(warmup + i)
            end.record()
    finally:
        if collecting:
            gc.enable()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) * 1e-3 for s, e in events]


def time_queued(torch, fn, reps: int, warmup: int) -> list[float]:
    """Seconds per call of ``fn(i)`` on the device alone: ``time_calls`` with a kernel that sleeps
    ``QUEUE_AHEAD_CYCLES`` queued ahead of each call's start event, so the host has queued the whole call
    (a graph's launch, or an eager call's launches) before the GPU reaches it. What is timed is the GPU
    running the call's work back to back — what a step costs inside an engine's own captured decode step.
    A call that waits on the host (a sync) still has that wait in its time. ``time_calls`` of a small graph
    has the graph's submission in it: on an H200 host a graph of one empty launch times at tens of
    microseconds that way and at a few here."""
    return time_calls(torch, fn, reps, warmup, queued=True)


def copy_bandwidth(torch, nbytes: int = 2 << 30, reps: int = 20) -> float:
    """Device-to-device copy, bytes read + written per second (median of ``reps``)."""
    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    return 2 * nbytes / median(time_calls(torch, lambda i: dst.copy_(src), reps, warmup=3))


def graphs(torch, call, sets) -> list:
    """One CUDA graph of ``call(x)`` per input set ``x`` of ``sets`` (the step has no host sync, so it
    captures whole)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for x in sets:
            call(x)  # compile and warm outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    out = []
    for x in sets:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call(x)
        out.append(g)
    return out


KERNELS = ("stats_kernel", "step_kernel", "live_kernel", "edit_stats_kernel", "fused_stats_kernel", "process_kernel",
           "edit_kernel", "group_max_kernel", "compact_kernel", "lane_top_kernel", "select_kernel",
           "row_select_kernel", "decide_kernel")
"""The Triton device's kernels, named in a breakdown; any other kernel is summed under ``other``."""


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


def environment(torch) -> tuple[str, dict[str, str]]:
    """``(hardware, versions)`` for a record: the GPU's name (else the CPU's), and torch, Triton, CUDA and
    the driver's versions where they are known."""
    versions = {"torch": torch.__version__}
    try:
        import triton
        versions["triton"] = triton.__version__
    except ImportError:
        pass
    if torch.version.cuda:
        versions["cuda"] = torch.version.cuda
    if not torch.cuda.is_available():
        return f"CPU ({platform.processor() or platform.machine()})", versions
    driver = driver_version()
    if driver:
        versions["driver"] = driver
    return torch.cuda.get_device_name(), versions


def driver_version() -> str | None:
    """The NVIDIA driver's version (NVML, else ``nvidia-smi``), or None where neither answers."""
    try:
        import pynvml
        pynvml.nvmlInit()
        version = pynvml.nvmlSystemGetDriverVersion()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # no NVML binding or library: ask nvidia-smi
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return out[0] if out else None
