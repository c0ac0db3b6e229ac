"""The compiled variants the Triton kernels ask for, counted in the interpreter (``triton_mode.recorded_launches``).

A compiled kernel is specialised on its constexprs and on what its launcher reads off each other argument; each
new combination is a compilation on the GPU's host. An engine calls the step with a batch size that changes every
step, so at a fixed vocabulary, K and dtype the step must not compile again per batch size: the scratch views
(slices of one allocation at offsets that follow the batch) and the small counts are not specialised on.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tests.devices.interpreter_mode import enter_or_skip  # noqa: E402

enter_or_skip()

from devices import triton_device as td  # noqa: E402
from devices.triton_mode import launch_key, recorded_launches  # noqa: E402
from specsim.testing.batches import BatchSpec, random_batch, random_noise  # noqa: E402

pytestmark = [pytest.mark.needs_extra("triton"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]

DEVICE = td.TritonDevice("cpu", td.KernelConfig(block=64, num_warps=1, programs=1, race_block=None, race_warps=None))


def _keys(batch_sizes, *, vocab_size=16, max_k=2, mode="temperature") -> dict[str, set]:
    rng = np.random.default_rng(7)
    with recorded_launches() as seen:
        for b in batch_sizes:
            spec = BatchSpec(batch=b, max_k=max_k, vocab_size=vocab_size, dtype="float32", draft_probs=True,
                             draw="inverse-cdf")
            batch = random_batch(rng, spec)
            if mode == "temperature":  # every request random, no filter: one path through the kernels
                batch = dataclasses.replace(batch, temperature=np.full(b, 0.7), top_k=np.zeros(b, np.int64),
                                            top_p=np.ones(b))
            DEVICE.verify(batch, random_noise(rng, batch))
    return seen


def test_the_step_compiles_once_across_batch_sizes():
    seen = _keys(range(1, 10))
    assert set(seen) >= {"stats_kernel", "step_kernel"}
    for name in ("stats_kernel", "step_kernel"):
        assert len(seen[name]) == 1, (name, len(seen[name]))


def test_a_new_vocabulary_or_dtype_is_a_new_variant():
    """The key still tells apart what the compiled code depends on: the counter is not blind."""
    small, large = _keys([3], vocab_size=16), _keys([3], vocab_size=257)
    assert small["step_kernel"] != large["step_kernel"]


def test_launch_key_reads_alignment_unless_the_kernel_declines_it():
    tk = td.kernels(interpret=True)
    buffer = torch.empty(9, dtype=torch.float32)
    aligned, offset = buffer[:4], buffer[1:5]  # 16-byte aligned, then 4 bytes past it
    probe = tk.exponential_kernel  # its words_ptr is specialised on alignment
    assert launch_key(probe, (aligned, aligned, 4, False), {}) != launch_key(probe, (offset, aligned, 4, False), {})
