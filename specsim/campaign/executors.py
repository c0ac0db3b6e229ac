"""Where shards run: this process, local processes, or a Ray cluster.

Each executor has ``map(fn, tasks)``, yielding ``(task, result)`` as shards
finish (in any order: the merge does not care), and ``describe()``, what the
report says about where and how the campaign ran. A worker that dies (killed,
out of memory) loses only its running shard, which runs again: Ray retries
the task (``max_retries``), the process executor starts a new pool for the
shards not yet returned. Nothing is counted twice, since a shard's result is
taken once, from the one run that returned it.

Resources: a GPU device's worker holds one GPU (Ray ``num_gpus=1``; local
processes get ``CUDA_VISIBLE_DEVICES`` one GPU each), a CPU device's one core
(Ray ``num_cpus=1``; one torch thread per process).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

EXECUTORS = ("inprocess", "processes", "ray")

RAY_VERSION = "2.60.0"
"""The Ray release CI installs (``.ci/extras.sh``) and this executor was checked with."""


class InProcess:
    """Every shard here, in order: today's L3 group, and the default."""

    name = "inprocess"

    def map(self, fn, tasks):
        for task in tasks:
            yield task, fn(task)

    def describe(self) -> dict:
        from specsim.campaign.tasks import where
        return {"executor": self.name, "workers": 1, "where": [where()]}


def _init_worker(gpus: list[str], counter) -> None:
    """A local worker's setup: one core (one torch thread), or one GPU of ``gpus`` in turn."""
    os.environ["OMP_NUM_THREADS"] = "1"
    if gpus:
        with counter.get_lock():
            slot = counter.value
            counter.value += 1
        os.environ["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    import torch
    torch.set_num_threads(1)


@contextmanager
def one_torch_thread():
    """One torch thread while a shard runs, whichever executor runs it (a Ray worker or this process
    too, not only a local worker that ``_init_worker`` set up); the previous count is restored after."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class Processes:
    """``workers`` local processes (spawned, so a CUDA parent is safe); a broken pool is replaced.

    ``gpus``: the GPU ids to spread workers over (one each), or [] for a CPU device.
    """

    name = "processes"
    max_attempts = 3

    def __init__(self, workers: int, gpus: list[str] | None = None):
        if workers < 1:
            raise ValueError(f"workers: must be >= 1, got {workers}")
        self.workers = workers
        self.gpus = gpus or []
        self.seen: set[str] = set()

    def _pool(self) -> ProcessPoolExecutor:
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        return ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_init_worker,
                                   initargs=(self.gpus, ctx.Value("i", 0)))

    def map(self, fn, tasks):
        pending = list(tasks)
        attempts = {id(t): 0 for t in pending}
        while pending:
            pool = self._pool()
            futures = {pool.submit(fn, t): t for t in pending}
            pending = []
            try:
                while futures:
                    done, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for f in done:
                        task = futures.pop(f)
                        try:
                            result = f.result()
                        except BrokenProcessPool:
                            attempts[id(task)] += 1
                            if attempts[id(task)] >= self.max_attempts:
                                raise
                            pending.append(task)
                            continue
                        self.seen.add(result.get("where", "?"))
                        yield task, result
            finally:
                pool.shutdown(wait=True, cancel_futures=True)

    def describe(self) -> dict:
        return {"executor": self.name, "workers": self.workers, "gpus": self.gpus, "where": sorted(self.seen)}


class Ray:
    """Ray tasks, one shard each: ``ray.init()`` locally (``workers`` CPUs, or the GPUs it finds) or ``address``.

    Ray is an optional extra (``pip install ray==RAY_VERSION``). A worker process
    that dies mid-shard is replaced by Ray and its shard retried
    (``max_retries``); application errors are not retried (they are the device's).
    """

    name = "ray"
    max_retries = 3

    def __init__(self, workers: int | None = None, address: str | None = None, gpu: bool = False):
        try:
            import ray
        except ImportError as e:
            raise ImportError(f"the ray executor needs ray (pip install ray=={RAY_VERSION}): {e}") from e
        self.ray = ray
        self.gpu = gpu
        self.address = address
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        self.seen: set[str] = set()

    def map(self, fn, tasks):
        ray = self.ray
        options = {"num_gpus": 1} if self.gpu else {"num_cpus": 1}
        remote = ray.remote(max_retries=self.max_retries, retry_exceptions=False, **options)(_apply)
        fn_ref = ray.put(fn)
        refs = {remote.remote(fn_ref, t): t for t in tasks}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                task = refs.pop(ref)
                result = ray.get(ref)
                self.seen.add(result.get("where", "?"))
                yield task, result

    def describe(self) -> dict:
        res = self.ray.cluster_resources()
        return {"executor": self.name, "address": self.address or "local (ray.init())",
                "ray": self.ray.__version__, "cluster": {k: res[k] for k in ("CPU", "GPU") if k in res},
                "per_worker": {"num_gpus": 1} if self.gpu else {"num_cpus": 1}, "where": sorted(self.seen)}


def _apply(fn, task):
    """A Ray task: ``fn(task)`` (``fn`` may be any picklable callable, not only a function)."""
    return fn(task)


def make_executor(name: str, workers: int | None = None, address: str | None = None, gpu: bool = False):
    """An executor by name (``EXECUTORS``)."""
    if name == "inprocess":
        return InProcess()
    if name == "processes":
        gpus = _visible_gpus() if gpu else []
        return Processes(workers or (len(gpus) if gpus else os.cpu_count() or 1), gpus)
    if name == "ray":
        return Ray(workers, address, gpu)
    raise ValueError(f"executor: must be one of {', '.join(EXECUTORS)}, got {name!r}")


def _visible_gpus() -> list[str]:
    import torch
    return [str(i) for i in range(torch.cuda.device_count())]
