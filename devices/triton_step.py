"""The Triton step as an engine calls it, eagerly, step after step: ``TritonStep``.

``devices.triton_device.verify_tensors`` is two Triton launches and three
allocations; from Python that is ~0.1 ms of host work a call, more than the
GPU needs for a small step. An engine calls its sampler with the same input
buffers step after step (a caching allocator hands the same blocks back), so
``TritonStep`` keeps a CUDA graph of the step per call signature — the data
pointers, shapes and dtypes of the tensors and the host arguments — and
replays it: a dictionary lookup and one graph launch.

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

>>> step = TritonStep()                                           # doctest: +SKIP
>>> out, num_accepted = step(cu, ids, draft_probs, logits, temperature, max_k=4,
...                          seeds=seeds, positions=positions)     # doctest: +SKIP
"""

from __future__ import annotations

from collections import OrderedDict
from types import ModuleType

from devices.triton_device import KernelConfig, verify_tensors


class GraphCache:
    """What a CUDA-graph cache per call signature shares (``TritonStep``, ``devices.filter_graph.FilterCuts``):
    ``_seen`` (signatures run once, not captured yet) and ``_captured`` (signature → graph and its buffers),
    each an ``OrderedDict`` trimmed least-recently-used first."""

    _seen: OrderedDict
    _captured: OrderedDict

    @staticmethod
    def _remember(table: OrderedDict, key, value, capacity: int) -> None:
        table[key] = value
        while len(table) > capacity:
            table.popitem(last=False)

    def clear(self) -> None:
        """Drop every graph (and the GPU memory their pools hold)."""
        self._seen.clear()
        self._captured.clear()


class TritonStep(GraphCache):
    """``verify_tensors`` with a CUDA graph per call signature (see the module docstring)."""

    def __init__(self, config: KernelConfig | None = None, *, capacity: int = 16, graphs: bool = True,
                 kernels_module: ModuleType | None = None):
        self.config = config
        self.capacity = capacity
        self.graphs = graphs
        self.kernels_module = kernels_module
        self._seen: OrderedDict = OrderedDict()     # signatures run once, not captured yet
        self._captured: OrderedDict = OrderedDict()  # signature → (graph, outputs)

    def __call__(self, cu, draft_token_ids, draft_probs, target_logits, temperature, *, max_k: int,
                 seeds=None, positions=None, uniforms=None, exponentials=None):
        """Same arguments and result as ``verify_tensors`` (shapes in its docstring)."""
        tensors = (cu, draft_token_ids, draft_probs, target_logits, temperature, seeds, positions, uniforms,
                   exponentials)
        if not self.graphs or not target_logits.is_cuda:
            return self._launch(tensors, max_k)
        import torch
        if torch.cuda.is_current_stream_capturing():
            return self._launch(tensors, max_k)
        key = (max_k,) + tuple(None if t is None else (t.data_ptr(), t.shape, t.dtype) for t in tensors)
        hit = self._captured.get(key)
        if hit is not None:  # the hot path: one lookup, one graph launch
            self._captured.move_to_end(key)
            hit[0].replay()
            return hit[1]
        if key not in self._seen:
            self._remember(self._seen, key, True, 4 * self.capacity)
            return self._launch(tensors, max_k)
        del self._seen[key]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):  # synchronises, captures on a side stream; kernels compiled by now
            outputs = self._launch(tensors, max_k)
        self._remember(self._captured, key, (graph, outputs), self.capacity)
        graph.replay()
        return outputs

    def _launch(self, tensors: tuple, max_k: int):
        cu, draft_token_ids, draft_probs, target_logits, temperature, seeds, positions, uniforms, exponentials = tensors
        return verify_tensors(cu, draft_token_ids, draft_probs, target_logits, temperature, max_k=max_k, seeds=seeds,
                              positions=positions, uniforms=uniforms, exponentials=exponentials, config=self.config,
                              kernels_module=self.kernels_module)


__all__ = ["GraphCache", "TritonStep"]
