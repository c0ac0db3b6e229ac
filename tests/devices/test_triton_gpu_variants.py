"""The compiled Triton kernels' variants that only a GPU checks: Triton's interpreter runs a kernel's Python, so it
neither compiles a variant nor type-checks its branches (a compiled ``if`` must yield one type on both sides).

SPEC 1.14's twins of the §12 edges in 16-bit dtypes on the keyed streams were the first checks to ask for the §12
race's keyed variant with float16 and bfloat16 logits (``race_chunk`` with ``SAMPLER``, ``KEYED`` and ``BOUND``): it
did not compile (``y0`` loaded in 16 bits, redefined in float32 in a branch), so the device raised on every such
call. Run on a GPU: ``python -m pytest -q tests/devices/test_triton_gpu_variants.py``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from specsim.conformance.run.runner import Context  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.needs_extra("triton"),
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (compiled Triton kernels)")]

SIXTEEN = ("float16", "bfloat16")


@pytest.fixture(scope="module")
def device():
    from devices.triton_device import make_device
    return make_device()


@pytest.mark.parametrize("dtype", SIXTEEN)
def test_every_sampler_edge_on_the_keyed_streams_in_16_bits_at_batch_sizes(device, dtype):
    """Every §12 edge and order whose logits ``dtype`` holds, at ``--quick``'s batch sizes, on the keyed streams."""
    from specsim.conformance.cases.edges import dtype_twins
    from specsim.conformance.checks.sampler.group import edge_batch_checks
    from specsim.testing.sampler_edges import SAMPLER_EDGES
    names = [f"L1-sampler/edge/{edge.name}/{order}/{dtype}/keyed/batches" for edge in SAMPLER_EDGES
             for order in edge.orders if dtype in dtype_twins(edge, device.capabilities)]
    results = [r for name in names for r in edge_batch_checks(device, Context(quick=True), only=name)]
    assert len(results) == len(names) > 20
    assert [(r.name, r.status, r.detail[:400]) for r in results if r.status != "pass"] == []


@pytest.mark.parametrize("dtype", SIXTEEN)
def test_a_sampler_edge_among_fillers_on_the_keyed_streams_in_16_bits(device, dtype, monkeypatch):
    from specsim.conformance.cases import declared
    from specsim.conformance.checks.sampler.group import edge_mixed_checks
    monkeypatch.setattr(declared, "sampler_mixed_sizes", lambda ctx: (33,))
    name = f"L1-sampler/edge/mask-forbids-draft/canonical/{dtype}/keyed/mixed"
    results = edge_mixed_checks(device, Context(), only=name)
    assert [r.name for r in results] == [name, name.replace("/edge/", "/edge-neighbours/")]
    assert {r.status for r in results} == {"pass"}, [r.detail[:400] for r in results]
