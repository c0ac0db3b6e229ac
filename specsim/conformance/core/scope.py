"""What a run actually asked of the device: the largest call served in each noise mode.

A verdict states its scope (SPEC §10): not what the device declares, but what the checks
exercised. Every group calls the device through ``_common.ask``, which records each call the
device served (not one it refused) here: per noise mode, the largest vocabulary, draft length,
batch and tree, and the dtypes. ``runner.run_group`` clears the record before a group and reads it
after, so each group's record is its own (the isolated runner writes it beside the group's
results); ``merge`` adds groups together.

Noise modes (SPEC §5):

- ``injected``: the call carried noise (§5.1);
- ``keyed``: no noise, and the device declares Philox keyed streams (§5.2 bit for bit);
- ``device-rng``: no noise, the device's own generator (held to the law, not to tokens).

Example::

    >>> import numpy as np
    >>> from devices.protocol import VerifyBatch
    >>> clear()
    >>> b = VerifyBatch(np.array([2]), np.array([1, 2]), None, np.zeros((3, 5), np.float32),
    ...                 np.ones(1), np.zeros(1, np.int64), np.ones(1))
    >>> record(b, noise=object(), rng="none")
    >>> snapshot()["injected"]
    {'calls': 1, 'V': 5, 'K': 2, 'batch': 1, 'tree_nodes': 0, 'dtypes': ['float32']}
"""

from __future__ import annotations

import numpy as np

MODES = ("injected", "keyed", "device-rng")
SIZES = ("V", "K", "batch", "tree_nodes")

FORM_ONLY_GROUPS = ("capabilities", "input-rules")
"""Groups whose calls check the form of an answer or a refusal, not its law: their calls are the
scope's ``served``, never its ``checked``."""

_record: dict[str, dict] = {}


def mode_of(noise, rng: str) -> str:
    """The call's noise mode (see the module docstring)."""
    if noise is not None:
        return "injected"
    return "keyed" if rng == "philox" else "device-rng"


def _sizes(batch) -> dict:
    nodes = getattr(batch, "num_nodes", None)
    if nodes is not None:  # a TreeBatch: its K is the deepest path
        depths = batch.depths()
        return {"V": int(batch.vocab_size), "K": int(np.max(depths, initial=0)), "batch": int(batch.batch_size),
                "tree_nodes": int(np.max(np.asarray(nodes), initial=0))}
    return {"V": int(batch.vocab_size), "K": int(batch.max_k), "batch": int(batch.batch_size), "tree_nodes": 0}


def record(batch, noise, rng: str) -> None:
    """Note one call the device served (``batch`` a ``VerifyBatch`` or ``TreeBatch``)."""
    try:
        sizes = _sizes(batch)
        dtype = np.asarray(batch.target_logits).dtype.name
    except Exception:  # a malformed batch is the check's business, never the record's
        return
    entry = _record.setdefault(mode_of(noise, rng), {"calls": 0, **{k: 0 for k in SIZES}, "dtypes": []})
    entry["calls"] += 1
    for k in SIZES:
        entry[k] = max(entry[k], sizes[k])
    if dtype not in entry["dtypes"]:
        entry["dtypes"] = sorted(entry["dtypes"] + [dtype])


def clear() -> None:
    _record.clear()


def snapshot() -> dict:
    """The record so far: ``{mode: {"calls", "V", "K", "batch", "tree_nodes", "dtypes"}}`` (JSON-ready)."""
    return {m: dict(e, dtypes=list(e["dtypes"])) for m, e in _record.items()}


def merge(records) -> dict:
    """Several groups' records as one (largest of each size, calls added)."""
    out: dict[str, dict] = {}
    for rec in records:
        for m, e in (rec or {}).items():
            o = out.setdefault(m, {"calls": 0, **{k: 0 for k in SIZES}, "dtypes": []})
            o["calls"] += int(e.get("calls", 0))
            for k in SIZES:
                o[k] = max(o[k], int(e.get(k, 0)))
            o["dtypes"] = sorted(set(o["dtypes"]) | set(e.get("dtypes", ())))
    return {m: out[m] for m in MODES if m in out}


def of_run(group_records: dict[str, dict]) -> dict:
    """A run's scope from its groups' records (``{group: record}``): ``checked`` (groups that hold
    the output to its law) and ``served`` (every group, the form-only ones included)."""
    law = [r for g, r in group_records.items() if g not in FORM_ONLY_GROUPS]
    return {"checked": merge(law), "served": merge(group_records.values())}
