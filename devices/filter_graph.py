"""The filters' cut step after step: a CUDA graph of its device work per call signature.

``devices.triton_device.filter_cuts`` is a handful of launches (the top-k candidates' sweep and
select, the decisions); called eagerly, its host work must stay below the kernels' time for the GPU
not to wait (H100, 256 × 4 × 128256: it does on a quiet host, the parameters kept on the device by
``filter_plan``; docs/triton-device.md's filter profile). An engine filters the same buffers with the
same parameters step after step, so ``FilterCuts`` takes the launches off the host: it keeps a
CUDA graph of ``filter_cut.candidate_cut`` per signature — the logits' address, shape and dtype,
the parameters' values, the order — and replays it, as ``devices.triton_step.TritonStep``
does for the step: the first call with a signature runs eagerly, the second captures and
replays, later calls replay. ``filter_cut.finish_cut`` (the rows that decide on their whole row,
known on the host) runs after the replay every call. Neither half syncs with the host.

Graphs are taken only where every target row filters (the usual batch) and the logits are on
a CUDA device; otherwise, or where a capture fails, the call is ``filter_cuts``. The returned
cut belongs to the graph: its next replay overwrites it.

>>> cuts = FilterCuts(top_values)                                            # doctest: +SKIP
>>> cut = cuts(logits, cu, temperature, top_k, top_p)                        # doctest: +SKIP
>>> out, num_accepted = verify_tensors(cu_t, ids, probs, logits, temps, max_k=4, cut=cut, ...)  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections import OrderedDict

import numpy as np

from devices.filter_cut import candidate_cut, finish_cut, torch_top_values
from devices.triton_device import filter_cuts, filter_plan, filtered_requests
from devices.triton_step import GraphCache


class FilterCuts(GraphCache):
    """``filter_cuts`` with a CUDA graph per call signature (see the module docstring).

    ``top_values``: ``filter_cut.TopValues`` (None: ``torch.topk``); ``capacity``: graphs kept
    (least recently used dropped)."""

    def __init__(self, top_values=None, *, capacity: int = 16, graphs: bool = True):
        self.top_values = top_values or torch_top_values
        self.capacity = capacity
        self.graphs = graphs
        self._seen: OrderedDict = OrderedDict()      # signatures run once, not captured yet
        self._captured: OrderedDict = OrderedDict()  # signature → (graph, params, plan, cut)
        self._eager: OrderedDict = OrderedDict()     # signatures whose capture failed (trimmed as _seen is)

    def __call__(self, target_logits, cu, temperature, top_k, top_p, min_p=None, order: str = "canonical"):
        """Same arguments and result as ``filter_cuts`` (``[rows]`` cut or None)."""
        args = (cu, temperature, top_k, top_p, min_p)
        uses = filtered_requests(target_logits.shape[1], temperature, top_k, top_p, min_p)
        if not uses.any():
            return None
        every = int((cu[1:] - cu[:-1] + 1)[uses].sum()) == target_logits.shape[0]
        if not (self.graphs and target_logits.is_cuda and every):
            return filter_cuts(target_logits, *args, order, self.top_values)
        import torch
        key = (target_logits.data_ptr(), tuple(target_logits.shape), target_logits.dtype, order) + tuple(
            None if a is None else np.asarray(a).tobytes() for a in args)
        hit = self._captured.get(key)
        if hit is not None:  # the hot path: one lookup, one graph launch
            self._captured.move_to_end(key)
            graph, params, plan, cut = hit
            graph.replay()
            return finish_cut(target_logits, params, plan, cut, order)
        f, plan = filter_plan(target_logits, *args)
        if key in self._eager or key not in self._seen or torch.cuda.is_current_stream_capturing():
            self._remember(self._seen, key, True, 4 * self.capacity)
            cut = candidate_cut(target_logits, f.params, plan, order, self.top_values)
            return finish_cut(target_logits, f.params, plan, cut, order)
        del self._seen[key]
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):  # kernels compiled and buffers sized by the eager call before
                cut = candidate_cut(target_logits, f.params, plan, order, self.top_values)
        except Exception as e:  # noqa: BLE001 — a capture torch refuses: stay eager for this signature
            warnings.warn(f"FilterCuts: capture failed ({type(e).__name__}: {e}); this signature runs eagerly")
            self._remember(self._eager, key, True, 4 * self.capacity)
            cut = candidate_cut(target_logits, f.params, plan, order, self.top_values)
            return finish_cut(target_logits, f.params, plan, cut, order)
        self._remember(self._captured, key, (graph, f.params, plan, cut), self.capacity)
        graph.replay()
        return finish_cut(target_logits, f.params, plan, cut, order)


__all__ = ["FilterCuts"]
