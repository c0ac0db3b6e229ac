"""``devices.triton_step``'s filters (``StepFilters``) without Triton: which batches a CUDA graph can hold
(``graph_holds``: no row filters, or every row filters on its top-k candidates) and what a graph's
signature depends on. The kernels themselves: ``tests/devices/test_triton_device.py`` (the interpreter)
and ``tools/gpu/triton_conformance.py`` (compiled: eager, capture, replay)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from devices.filter_cut import CANDIDATES  # noqa: E402
from devices.triton_device import filter_plan  # noqa: E402
from devices.triton_step import StepFilters, graph_holds  # noqa: E402

V = 2048  # above filter_cut.CANDIDATES: a top-k of CANDIDATES decides on its candidates
CU = np.array([0, 2, 2, 5])  # three requests: K = 2, 0, 3 (8 target rows)


def holds(temperature, top_k, top_p, min_p=None) -> bool:
    logits = torch.zeros(8, V)
    return graph_holds(filter_plan(logits, CU, np.asarray(temperature, float), np.asarray(top_k),
                                   np.asarray(top_p, float), None if min_p is None else np.asarray(min_p, float)))


def test_a_graph_holds_no_filter_and_every_row_on_its_candidates():
    assert holds([1.0, 0.7, 0.0], [0, 0, 0], [1.0, 1.0, 1.0])                 # nothing filters: the plain step
    assert holds([1.0, 0.7, 0.5], [50, 1, CANDIDATES], [0.9, 1.0, 0.5])      # every row on its candidates


@pytest.mark.parametrize("why,temperature,top_k,top_p", [
    ("a greedy request beside filtering ones", [1.0, 0.7, 0.0], [50, 50, 50], [0.9, 0.9, 0.9]),
    ("a request that filters nothing", [1.0, 0.7, 0.5], [50, 0, 50], [0.9, 1.0, 0.9]),
    ("top-p alone decides on the whole row", [1.0, 0.7, 0.5], [0, 0, 0], [0.9, 0.9, 0.9]),
    ("top-k past the candidates", [1.0, 0.7, 0.5], [50, CANDIDATES + 1, 50], [0.9, 0.9, 0.9]),
])
def test_a_graph_does_not_hold_rows_chosen_on_the_host(why, temperature, top_k, top_p):
    """Which rows filter, or decide on their whole row, reach the device by a host copy each call."""
    assert not holds(temperature, top_k, top_p), why


def test_min_p_alone_filters_every_row_on_its_whole_row():
    assert not holds([1.0, 0.7, 0.5], [0, 0, 0], [1.0, 1.0, 1.0], min_p=[0.05, 0.05, 0.05])
    assert holds([1.0, 0.7, 0.5], [50, 50, 50], [1.0, 1.0, 1.0], min_p=[0.05, 0.05, 0.05])


def test_the_signature_holds_every_value_and_the_order():
    base = StepFilters(CU, np.array([1.0, 0.7, 0.5]), np.array([50, 50, 50]), np.array([0.9, 0.9, 0.9]))
    assert base.signature() == StepFilters(*[np.copy(a) for a in base[:4]]).signature()
    changed = [base._replace(top_k=np.array([50, 49, 50])), base._replace(top_p=np.array([0.9, 0.9, 0.8])),
               base._replace(temperature=np.array([1.0, 0.7, 0.6])), base._replace(cu=np.array([0, 2, 3, 5])),
               base._replace(min_p=np.array([0.1, 0.1, 0.1])), base._replace(order="vllm")]
    assert len({base.signature()} | {c.signature() for c in changed}) == 1 + len(changed)
    assert base.arguments() == (base.cu, base.temperature, base.top_k, base.top_p, None, "canonical")
