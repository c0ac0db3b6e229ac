"""The filters' cut reads nothing back from the device: ``filter_cuts`` (and ``FilterCuts``'
replay) issue no host sync, so an engine's host runs ahead of the GPU through them.

On CPU the host reads a sync would need (``.item()``, ``.tolist()``, ``.cpu()``, ``bool(t)``,
``torch.nonzero``, a pageable ``torch.as_tensor(..., device=)``) raise while the cut is found;
on a CUDA GPU the cut runs under ``torch.cuda.set_sync_debug_mode("error")``."""

import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from devices import triton_device as td  # noqa: E402
from devices.filter_cut import torch_top_values  # noqa: E402

READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "__array__",
         "nonzero")


@contextlib.contextmanager
def host_reads_forbidden(monkeypatch):
    """Inside: every tensor read the host would wait for raises, naming it. Yields a dict whose
    ``"on"`` a caller clears around work that may read (a kernel launch in Triton's interpreter)."""
    state = {"on": True}

    def guard(name, original):
        def guarded(*args, **kwargs):
            if state["on"]:
                raise AssertionError(f"the filter path read a tensor on the host: {name}")
            return original(*args, **kwargs)
        return guarded

    with monkeypatch.context() as m:
        for name in READS:
            m.setattr(torch.Tensor, name, guard(f"Tensor.{name}", getattr(torch.Tensor, name)))
        m.setattr(torch, "nonzero", guard("torch.nonzero", torch.nonzero))
        for name in ("as_tensor", "tensor"):
            original = getattr(torch, name)

            def pageable(data, *args, _original=original, _name=name, **kwargs):
                if state["on"] and (kwargs.get("device") is not None or len(args) >= 2):
                    raise AssertionError(f"the filter path copied host data with torch.{_name}(..., device=...) "
                                         "(pageable: a stream sync on CUDA); use filter_cut.to_device")
                return _original(data, *args, **kwargs)
            m.setattr(torch, name, pageable)
        yield state


def same_cut(got, want) -> bool:
    """Two ``filter_cut.Cut``s bit for bit: floors, and stats where either has them."""
    if (got.stats is None) != (want.stats is None):
        return False
    return torch.equal(got.floor, want.floor) and (got.stats is None or torch.equal(got.stats, want.stats))


def batches(rng, V: int):
    """``(logits [rows, V], cu, temperature, top_k, top_p, min_p)``: every request on candidates;
    then a mix (top-p only, off, greedy, k past V) with ties and bans; each with and without min_p."""
    B = 6
    cu = np.concatenate([[0], np.cumsum(rng.integers(0, 4, B))])
    rows = int(cu[-1]) + B
    z = np.round(rng.standard_normal((rows, V)) * 4) / 2
    z[rng.random((rows, V)) < 0.3] = -np.inf
    logits = torch.tensor(z, dtype=torch.float32)
    every = (np.full(B, 1.0), rng.integers(1, 40, B), rng.choice([1.0, 0.9, 0.5], B))
    mixed = (rng.choice([0.0, 0.7, 1.0], B), rng.choice([0, 3, 20, V + 1], B), rng.choice([1.0, 0.9, 0.5], B))
    min_p = rng.choice([0.0, 0.1], B)
    return [(logits, cu, *params, mp) for params in (every, mixed) for mp in (None, min_p)]


@pytest.mark.parametrize("order", ["canonical", "vllm"])
def test_filter_cuts_reads_nothing_back_on_cpu(monkeypatch, order):
    rng = np.random.default_rng(11)
    for logits, cu, temperature, top_k, top_p, min_p in batches(rng, 200):
        args = (logits, cu, temperature, top_k, top_p, min_p, order, torch_top_values)
        want = td.filter_cuts(*args)
        with host_reads_forbidden(monkeypatch):
            got = td.filter_cuts(*args)
        assert want is not None and same_cut(got, want)


def test_the_guard_catches_a_host_read(monkeypatch):
    with host_reads_forbidden(monkeypatch), pytest.raises(AssertionError, match="Tensor.__bool__"):
        bool(torch.ones(2).all())
    with host_reads_forbidden(monkeypatch), pytest.raises(AssertionError, match="torch.as_tensor"):
        torch.as_tensor(np.arange(3), device="cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.set_sync_debug_mode)")
def test_filter_cuts_issues_no_sync_on_cuda():
    from devices.filter_graph import FilterCuts
    rng = np.random.default_rng(12)
    for logits, cu, temperature, top_k, top_p, min_p in batches(rng, 4096):
        args = (logits.cuda(), cu, temperature, top_k, top_p, min_p)
        want = td.filter_cuts(*args, top_values=torch_top_values)  # first call: pinned blocks allocated
        graphs = FilterCuts(torch_top_values)
        for _ in range(3):  # eager, capture, replay: the next call replays
            graphs(*args)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            got = td.filter_cuts(*args, top_values=torch_top_values)
            replayed = graphs(*args)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        assert want is not None and same_cut(got, want) and same_cut(replayed, want)
