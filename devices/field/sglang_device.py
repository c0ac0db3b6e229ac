"""SGLang's verification kernel (sgl-kernel's ``tree_speculative_sampling_target_only`` used as a chain) as the
``sglang`` device — where its compiled kernel can be loaded.

It cannot be loaded on the machines this project runs on, and this module says so
rather than skipping silently (``specsim devices``, docs/field.md). What was measured:

* ``sglang-kernel`` 0.4.9 (the package's current name; 0.4.10 the same) ships only
  as a 371 MB x86-64 wheel, no source distribution. The kernel's operator is in
  ``sgl_kernel/sm90/common_ops.abi3.so`` (12.3 MB, 8.8 MB compressed), so size is not
  the barrier: that member could be carried to a CUDA machine as FlashInfer's sources are.
* The barrier is torch. The library links libtorch's C++ ABI (not its stable ABI) and
  the wheel pins ``torch==2.14.1``; 3 of the 91 libtorch symbols it needs are absent
  from torch 2.11.0's libraries (``c10::cuda::CUDAErrorLogCapture``'s constructor,
  ``c10_cuda_check_implementation`` taking one, and ``c10::NotImplementedError(SourceLocation,
  std::string)``), and a CUDA machine with torch 2.11.0+cu130 and no network has no other route.
* ``pip download --no-deps sgl-kernel`` (the old name) gives 0.3.21: 535.6 MB, its sm90
  ``common_ops.abi3.so`` alone 361 MB, built for torch 2.9.1.
* The kernel's source is public (sgl-project/sglang, ``sgl-kernel/csrc/speculative/
  speculative_sampling.cuh``, a header over FlashInfer's ``sampling.cuh``); compiling it with
  a CUDA machine's nvcc (CUDA 13.0) against torch 2.11 is the one route left. It is not taken:
  it would be this project's build of that source, to be pinned to a release's commit.

No adapter code is shipped for it: none could be run here, and an adapter that
was never run would be a claim, not a check. Nothing in this project imitates
the kernel: SPEC §11.4's ``"sglang"`` tree scheme is SPEC's definition of the
algorithm that kernel implements (the reference and the torch and Triton devices
implement that definition), and the catalogue holds SGLang's reported bugs
(docs/bugs.md, SGLang #35771 and others).
"""

from __future__ import annotations

SGLANG_KERNEL_VERSION = "0.4.9"
WHEEL_SIZE_MB = 371
TORCH_PIN = "2.14.1"
WHY_NOT = (f"sglang-kernel {SGLANG_KERNEL_VERSION} ships only as a {WHEEL_SIZE_MB} MB wheel (its kernel's "
           f"common_ops.abi3.so alone is 12 MB), compiled against torch=={TORCH_PIN}'s C++ ABI: 3 of the libtorch "
           "symbols it needs are missing from torch 2.11, a CUDA machine's; its CUDA source could be compiled there "
           "instead (devices/field/sglang_device.py)")


def make_device():
    import importlib.util
    if importlib.util.find_spec("sgl_kernel") is None:
        raise ImportError(f"sglang: sgl-kernel is not installed: {WHY_NOT}")
    raise ImportError("sglang: sgl-kernel is installed, but no adapter for it was written: no machine of this "
                      "project could load its wheel to check one against (see devices/field/sglang_device.py)")
