"""Host-side help every Triton module shares, with no Triton import: numpy arrays made torch
tensors, and how a pass splits the vocabulary among its programs.

It sits below the Triton modules: ``devices/triton_device.py`` and the kernel modules it loads
(``devices/triton_tree.py``) import it, and it imports none of them.

>>> to_torch(np.array([1, 2]), "cpu").tolist()
[1, 2]
"""

from __future__ import annotations

import math

import numpy as np


def to_torch(a: np.ndarray, device: str):
    """A numpy array as a torch tensor on ``device``; bfloat16 (``ml_dtypes``) through its bits,
    since torch does not read that numpy dtype."""
    import torch
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).to(device)
    return torch.as_tensor(a, device=device)


def vocab_chunks(vocab_size: int, rows: int, block: int, programs: int) -> tuple[int, int]:
    """``(chunk, num_chunks)``: split V so that rows × num_chunks ≈ programs; chunk is a multiple of block.

    >>> vocab_chunks(128256, 1280, 2048, 2112)
    (65536, 2)
    """
    tiles = math.ceil(vocab_size / block)
    want = max(1, min(tiles, math.ceil(programs / max(rows, 1))))
    chunk = math.ceil(tiles / want) * block
    return chunk, math.ceil(vocab_size / chunk)


__all__ = ["to_torch", "vocab_chunks"]
