"""Host-side help every Triton module shares, with no Triton import: numpy arrays made torch tensors.

It sits below the Triton modules: ``devices/triton_device.py`` and the kernel modules it loads
(``devices/triton_tree.py``) import it, and it imports none of them.

>>> to_torch(np.array([1, 2]), "cpu").tolist()
[1, 2]
"""

from __future__ import annotations

import numpy as np


def to_torch(a: np.ndarray, device: str):
    """A numpy array as a torch tensor on ``device``; bfloat16 (``ml_dtypes``) through its bits,
    since torch does not read that numpy dtype."""
    import torch
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).to(device)
    return torch.as_tensor(a, device=device)


__all__ = ["to_torch"]
