"""The Triton step as an engine calls it, eagerly, step after step: ``TritonStep``.

``devices.triton_device.verify_tensors`` is two Triton launches and three
allocations; from Python that is ~0.1 ms of host work a call, more than the
GPU needs for a small step. An engine calls its sampler with the same input
buffers step after step (a caching allocator hands the same blocks back), so
``TritonStep`` keeps a CUDA graph of the step per call signature — the data
pointers and dtypes of the tensors, the batch size, the target rows' shape and
the host arguments (``signature``) — and replays it: a dictionary lookup and
one graph launch.

* The first call with a signature runs the kernels (compiling them if needed);
  the second captures the graph and replays it; later calls replay. A
  signature seen once costs nothing more, so inputs at new addresses every
  step just run the kernels. At most ``capacity`` graphs are kept (least
  recently used dropped).
* A graph reads its inputs where they lie, so new values in the same buffers
  are verified afresh; it never copies inputs.
* The returned tensors belong to the graph: its next replay (the next call
  with the same signature) overwrites them. Copy what you keep past it —
  as an engine does with its sampled tokens.
* Inside a caller's own graph capture it only launches the kernels (the
  caller's graph then holds them). Off CUDA (the interpreter) it is
  ``verify_tensors``.
* With ``filters`` (``StepFilters``: SPEC §2's top-k and top-p, §12's min_p,
  set on the host as an engine sets them) the graph holds the filters' cut
  too (``devices.triton_device.filter_cuts``: the candidates' sweep and the
  decisions, about ten launches), so a filtered step is one graph launch as
  well. The parameters' values are part of the signature. A graph is taken
  where every target row filters on its top-k candidates (top-k at most
  ``filter_cut.CANDIDATES``) or none filters; a batch where some rows filter
  and others do not, or a row decides on its whole row, needs host-to-device
  copies of which rows, so it runs the launches each call (``filter_cuts``).

>>> step = TritonStep()                                           # doctest: +SKIP
>>> out, num_accepted = step(cu, ids, draft_probs, logits, temperature, max_k=4,
...                          seeds=seeds, positions=positions)     # doctest: +SKIP
>>> filters = StepFilters(cu_host, temperature_host, top_k, top_p)  # doctest: +SKIP
>>> out, num_accepted = step(cu, ids, draft_probs, logits, temperature, max_k=4,
...                          seeds=seeds, positions=positions, filters=filters)  # doctest: +SKIP
"""

from __future__ import annotations

from collections import OrderedDict
from types import ModuleType
from typing import NamedTuple

import numpy as np

from devices.triton_device import KernelConfig, default_config, filter_cuts, filter_plan, triton_top_values, verify_tensors


class StepFilters(NamedTuple):
    """SPEC §2's top-k and top-p (and §12's min_p) of one step, on the host, as an engine sets them
    (``devices.triton_device.filter_cuts``' arguments): ``cu`` ``[batch + 1]`` int64 (exclusive cumsum of
    num_draft_tokens), ``temperature``, ``top_k``, ``top_p`` ``[batch]``, ``min_p`` ``[batch]`` or None (off),
    all numpy; ``order`` the min_p profile (``"canonical"`` or ``"vllm"``)."""

    cu: np.ndarray
    temperature: np.ndarray
    top_k: np.ndarray
    top_p: np.ndarray
    min_p: np.ndarray | None = None
    order: str = "canonical"

    def signature(self) -> tuple:
        """The values a graph of the cut depends on: every array's bytes, and the order."""
        return tuple(None if a is None else np.asarray(a).tobytes()
                     for a in (self.cu, self.temperature, self.top_k, self.top_p, self.min_p)) + (self.order,)

    def arguments(self) -> tuple:
        """``filter_cuts``' arguments after the logits: ``cu, temperature, top_k, top_p, min_p, order``."""
        return self.cu, self.temperature, self.top_k, self.top_p, self.min_p, self.order


class GraphCache:
    """What a CUDA-graph cache per call signature shares (``TritonStep``, ``devices.filter_graph.FilterCuts``):
    ``_seen`` (signatures run once, not captured yet) and ``_captured`` (signature → graph and its buffers),
    each an ``OrderedDict`` trimmed least-recently-used first, and ``_eager`` (signatures never captured)."""

    _seen: OrderedDict
    _captured: OrderedDict
    _eager: OrderedDict         # signatures that run their launches each call (trimmed as ``_seen`` is)

    @staticmethod
    def _remember(table: OrderedDict, key, value, capacity: int) -> None:
        table[key] = value
        while len(table) > capacity:
            table.popitem(last=False)

    def clear(self) -> None:
        """Drop every graph (and the GPU memory their pools hold), and what is known of the signatures."""
        self._seen.clear()
        self._captured.clear()
        self._eager.clear()


class TritonStep(GraphCache):
    """``verify_tensors`` with a CUDA graph per call signature (see the module docstring).

    ``top_values``: how the filters' candidates are found (``filter_cut.TopValues``; default
    ``devices/triton_topk.py`` at ``config``'s launch shape, as ``TritonDevice`` finds them)."""

    def __init__(self, config: KernelConfig | None = None, *, capacity: int = 16, graphs: bool = True,
                 kernels_module: ModuleType | None = None, top_values=None):
        self.config = config
        self.capacity = capacity
        self.graphs = graphs
        self.kernels_module = kernels_module
        self.top_values = top_values
        self._seen: OrderedDict = OrderedDict()     # signatures run once, not captured yet
        self._captured: OrderedDict = OrderedDict()  # signature → (graph, outputs, what the graph reads)
        self._eager: OrderedDict = OrderedDict()    # signatures whose filters need host copies each call

    def __call__(self, cu, draft_token_ids, draft_probs, target_logits, temperature, *, max_k: int,
                 seeds=None, positions=None, uniforms=None, exponentials=None, filters: StepFilters | None = None):
        """Same arguments and result as ``verify_tensors`` (shapes in its docstring); ``filters``: the step's
        top-k, top-p and min_p (``StepFilters``), None for none."""
        tensors = (cu, draft_token_ids, draft_probs, target_logits, temperature, seeds, positions, uniforms,
                   exponentials)
        if not self.graphs or not target_logits.is_cuda:
            return self._launch(tensors, max_k, filters)
        import torch
        if torch.cuda.is_current_stream_capturing():
            return self._launch(tensors, max_k, filters)
        key = signature(tensors, max_k, filters)
        hit = self._captured.get(key)
        if hit is not None:  # the hot path: one lookup, one graph launch
            self._captured.move_to_end(key)
            hit[0].replay()
            return hit[1]
        if key in self._eager or key not in self._seen:
            self._remember(self._seen, key, True, 4 * self.capacity)
            return self._launch(tensors, max_k, filters)
        del self._seen[key]
        plan = None if filters is None else filter_plan(target_logits, *filters.arguments()[:5])
        if plan is not None and not graph_holds(plan):
            self._remember(self._eager, key, True, 4 * self.capacity)
            return self._launch(tensors, max_k, filters)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # synchronises, captures on a side stream; kernels compiled by now
            outputs = self._launch(tensors, max_k, filters, plan)
        self._remember(self._captured, key, (graph, outputs, plan), self.capacity)
        graph.replay()
        return outputs

    def _launch(self, tensors: tuple, max_k: int, filters: StepFilters | None, plan=None):
        cu, draft_token_ids, draft_probs, target_logits, temperature, seeds, positions, uniforms, exponentials = tensors
        cut = None if filters is None else self._cut(target_logits, filters, plan)
        return verify_tensors(cu, draft_token_ids, draft_probs, target_logits, temperature, max_k=max_k, seeds=seeds,
                              positions=positions, uniforms=uniforms, exponentials=exponentials, config=self.config,
                              kernels_module=self.kernels_module, cut=cut)

    def _cut(self, target_logits, filters: StepFilters, plan):
        """The filters' ``Cut`` (None: no row filters). With ``plan`` (``filter_plan``'s, made before a capture):
        only its device work, which a graph can hold (``graph_holds``)."""
        from devices.filter_cut import candidate_cut
        top_values = self.top_values or self._triton_top_values(target_logits.device)
        if plan is None:
            return filter_cuts(target_logits, *filters.arguments(), top_values=top_values)
        rows, cut_plan = plan
        if rows is None:
            return None
        return candidate_cut(target_logits, rows.params, cut_plan, filters.order, top_values)

    def _triton_top_values(self, device):
        from devices.triton_mode import interpreting, kernel_module
        self.top_values = triton_top_values(kernel_module("devices.triton_topk", bool(interpreting())),
                                            self.config or default_config(device))
        return self.top_values


def signature(tensors: tuple, max_k: int, filters: StepFilters | None) -> tuple:
    """What a graph of the step depends on, flat (it is made on every call: nested tuples and ``torch.Size``
    objects cost the hot path a third more): every tensor's data pointer and dtype, the batch size, the target
    rows' shape, ``max_k`` and the filters' values. The launches read nothing else of the tensors: the other
    shapes follow from these (``verify_tensors``' contract), and the kernels read rows in place."""
    cu, target_logits = tensors[0], tensors[3]
    return (max_k, cu.shape[0], *target_logits.shape, None if filters is None else filters.signature(),
            *[None if t is None else t.data_ptr() for t in tensors],
            *[None if t is None else t.dtype for t in tensors])


def graph_holds(plan) -> bool:
    """Whether a CUDA graph can hold the cut of ``filter_plan``'s ``(FilterRows or None, CutPlan or None)``: no
    row filters, or every row does and decides on its top-k candidates. Otherwise which rows filter (or decide
    on their whole rows) reach the device by a host copy each call (``filter_cuts``, ``filter_cut.finish_cut``),
    which a graph would replay from a freed host buffer."""
    rows, cut_plan = plan
    return rows is None or (cut_plan is not None and not cut_plan.whole.size and cut_plan.index is None)


__all__ = ["GraphCache", "StepFilters", "TritonStep", "graph_holds", "signature"]
