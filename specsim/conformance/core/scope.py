"""What a run actually asked of the device: the largest call served in each noise mode.

A verdict states its scope (SPEC §10): not what the device declares, but what the checks
exercised. Every group calls the device through ``_common.ask``, which records each call the
device served (not one it refused) here: per noise mode, the largest vocabulary, draft length,
batch and tree, the dtypes, and the variants (``variant_of``: dtype, kind of call, proposal form —
the axes kernels compile a variant by) with each one's largest sizes (``reach``), so that a verdict
names the declared variants no check asked (``unasked``) and those no check asked at every declared
limit (``verdict.profiles.unreached``, SPEC 1.15). ``runner.run_group`` clears the record before a group and reads it
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
    {'calls': 1, 'V': 5, 'K': 2, 'batch': 1, 'tree_nodes': 0, 'dtypes': ['float32'], 'variants': ['float32 sampled point'], 'reach': {'float32 sampled point': {'V': 5, 'K': 2, 'batch': 1, 'tree_nodes': 0}}}
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


KINDS = ("sampled", "greedy", "filtered", "sampler", "tree")
"""What a call asks beyond its dtype and proposal form, the axes kernels pick a variant by: every request greedy,
some cut by top-k or top-p, §12's parameters, a tree (SPEC §11); else sampled."""


def kind_of(batch) -> str:
    """The call's kind (``KINDS``), the most specific that applies."""
    if getattr(batch, "num_nodes", None) is not None:
        return "tree"
    sampler = getattr(batch, "sampler", None)
    if sampler is not None and sampler.given():
        return "sampler"
    if (np.asarray(batch.top_k) > 0).any() or (np.asarray(batch.top_p) < 1).any():
        return "filtered"
    return "greedy" if (np.asarray(batch.temperature) == 0).all() else "sampled"


def variant_of(batch) -> str:
    """``"<dtype> <kind> <form>"``: the logits' dtype, ``kind_of``, and ``draft`` (draft probabilities) or
    ``point`` (point proposals)."""
    form = "point" if getattr(batch, "draft_probs", None) is None else "draft"
    return f"{np.asarray(batch.target_logits).dtype.name} {kind_of(batch)} {form}"


def declared_variants(caps, mode: str) -> list[str]:
    """Every ``variant_of`` a device of capabilities ``caps`` declares it serves in ``mode`` (empty where it declares
    no such noise mode): each declared dtype, kind and proposal form (a tree in ``draft`` form only with ``"rrs"``
    and draft probabilities; ``"sglang"`` and greedy trees verify point proposals)."""
    if mode not in declared_modes(caps):
        return []
    forms = ["draft"] * bool(caps.draft_probs) + ["point"] * bool(caps.point_proposals)
    kinds = {"sampled": forms, "greedy": forms if caps.greedy else [],
             "filtered": forms if (caps.top_k or caps.top_p) else [], "sampler": forms if caps.sampler else []}
    schemes = set(caps.tree_schemes)
    kinds["tree"] = (["draft"] * bool("rrs" in schemes and caps.draft_probs)
                     + ["point"] * bool(schemes - {"rrs"} or ("rrs" in schemes and caps.point_proposals)))
    return sorted(f"{d} {k} {f}" for d in caps.dtypes for k in KINDS for f in kinds[k])


def declared_modes(caps) -> list[str]:
    """The noise modes (``MODES``) a device of capabilities ``caps`` declares."""
    return ["injected"] * bool(caps.injected_noise) + ["keyed"] * (caps.rng == "philox") + \
        ["device-rng"] * (caps.rng == "seeded")


def record(batch, noise, rng: str) -> None:
    """Note one call the device served (``batch`` a ``VerifyBatch`` or ``TreeBatch``)."""
    try:
        sizes = _sizes(batch)
        dtype = np.asarray(batch.target_logits).dtype.name
        variant = variant_of(batch)
    except Exception:  # a malformed batch is the check's business, never the record's
        return
    entry = _record.setdefault(mode_of(noise, rng), {"calls": 0, **{k: 0 for k in SIZES}, "dtypes": [], "variants": [],
                                                     "reach": {}})
    entry["calls"] += 1
    reach = entry.setdefault("reach", {}).setdefault(variant, {k: 0 for k in SIZES})
    for k in SIZES:
        entry[k] = max(entry[k], sizes[k])
        reach[k] = max(reach[k], sizes[k])
    if dtype not in entry["dtypes"]:
        entry["dtypes"] = sorted(entry["dtypes"] + [dtype])
    if variant not in entry["variants"]:
        entry["variants"] = sorted(entry["variants"] + [variant])


def clear() -> None:
    _record.clear()


def snapshot() -> dict:
    """The record so far: ``{mode: {"calls", "V", "K", "batch", "tree_nodes", "dtypes", "variants", "reach"}}``
    (JSON-ready; ``reach``: each variant's largest of each size)."""
    return {m: dict(e, dtypes=list(e["dtypes"]), variants=list(e["variants"]),
                    reach={v: dict(r) for v, r in e.get("reach", {}).items()}) for m, e in _record.items()}


def merge(records) -> dict:
    """Several groups' records as one (largest of each size, calls added)."""
    out: dict[str, dict] = {}
    for rec in records:
        for m, e in (rec or {}).items():
            o = out.setdefault(m, {"calls": 0, **{k: 0 for k in SIZES}, "dtypes": [], "variants": []})
            o["calls"] += int(e.get("calls", 0))
            for k in SIZES:
                o[k] = max(o[k], int(e.get(k, 0)))
            o["dtypes"] = sorted(set(o["dtypes"]) | set(e.get("dtypes", ())))
            o["variants"] = sorted(set(o["variants"]) | set(e.get("variants", ())))
            for v, r in (e.get("reach") or {}).items():
                mine = o.setdefault("reach", {}).setdefault(v, {k: 0 for k in SIZES})
                for k in SIZES:
                    mine[k] = max(mine[k], int(r.get(k, 0)))
    return {m: dict(out[m], reach=dict(sorted(out[m].get("reach", {}).items()))) for m in MODES if m in out}


def unasked(checked: dict, caps) -> dict[str, list[str]]:
    """Per declared noise mode, the declared variants (``declared_variants``) no call held to its law asked
    (``checked``: ``of_run``'s): kernel variants a PASS does not cover. Empty lists where every one was asked."""
    return {m: sorted(set(declared_variants(caps, m)) - set((checked.get(m) or {}).get("variants", ())))
            for m in declared_modes(caps)}


def of_run(group_records: dict[str, dict]) -> dict:
    """A run's scope from its groups' records (``{group: record}``): ``checked`` (groups that hold
    the output to its law) and ``served`` (every group, the form-only ones included)."""
    law = [r for g, r in group_records.items() if g not in FORM_ONLY_GROUPS]
    return {"checked": merge(law), "served": merge(group_records.values())}
