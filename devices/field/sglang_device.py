"""SGLang's verification kernel (sgl-kernel's ``tree_speculative_sampling_target_only`` used as a chain) as the
``sglang`` device — where its wheel can be had.

It cannot be had on the machines this project runs on, and this module says so
rather than skipping silently (``specsim devices``, docs/field.md):

* the x86-64 wheel of ``sglang-kernel`` 0.4.9 (the package's current name; ``sgl-kernel``
  before it) is 371 MB, over the 64 MiB one GPU call can carry to the GPU box, which has
  no network;
* it is built against ``torch==2.14.1`` (its ``Requires-Dist``), and its compiled
  operators load only with that torch; the GPU box has torch 2.11.

No adapter code is shipped for it: none could be run here, and an adapter that
was never run would be a claim, not a check. SGLang's rejection rule is in
the catalogue (docs/bugs.md, SGLang #35771) and its tree scheme in SPEC §11.
"""

from __future__ import annotations

SGLANG_KERNEL_VERSION = "0.4.9"
WHEEL_SIZE_MB = 371
TORCH_PIN = "2.14.1"


def make_device():
    import importlib.util
    if importlib.util.find_spec("sgl_kernel") is None:
        raise ImportError(f"sglang: sgl-kernel is not installed (sglang-kernel {SGLANG_KERNEL_VERSION}'s x86-64 "
                          f"wheel is {WHEEL_SIZE_MB} MB, over the 64 MiB a GPU call carries, and needs "
                          f"torch=={TORCH_PIN})")
    raise ImportError("sglang: sgl-kernel is installed, but no adapter for it was written: no machine of this "
                      "project could load its wheel to check one against (see devices/field/sglang_device.py)")
