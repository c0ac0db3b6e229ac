"""The Triton device's launch shapes per GPU: one tuned entry per GPU name, chosen by a sweep on that GPU.

``devices/triton_tuning.json`` ships the entries measured so far; ``specsim bench --tune`` measures one
for the GPU it runs on and writes it to a file of the same form, which ``SPECSIM_TRITON_TUNING=FILE``
puts in front of the shipped entries (an entry there wins for its GPU). A GPU without an entry runs
``KernelConfig()``'s defaults, tuned on an H100; ``KernelConfig.source`` says which it got
(``triton_device.default_config`` and ``config_of`` make the shape; this module reads and writes files).

An entry::

    "NVIDIA H200": {
      "measured": {"command": "...", "date": "...", "torch": "...", "triton": "...", "shape": "..."},
      "config": {"block": 2048, "num_warps": 4, ...},          # every call's launch shape
      "by_call": {"point/32": {"race_block": 1024}, ...}        # a kind of call's own, over "config"
    }

``config`` and each ``by_call`` entry name ``KernelConfig`` fields only (anything else is an error
naming the file, the GPU and the field); a ``by_call`` key is ``triton_device.call_key``'s.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib

SHIPPED = pathlib.Path(__file__).with_name("triton_tuning.json")
"""The entries measured so far, one per GPU name."""
ENV = "SPECSIM_TRITON_TUNING"
"""A file of entries (``specsim bench --tune``'s output) read before the shipped ones."""
CALL_KEYS = tuple(f"{mode}/{bits}" for mode in ("draft", "point") for bits in (16, 32, 64))
"""The kinds of call an entry may tune apart (``triton_device.call_key``)."""
TUNED_FIELDS = ("block", "num_warps", "programs", "race_block", "race_warps", "num_stages", "bound", "block16",
                "programs_by_batch", "race_by_batch", "race_programs_by_batch")
"""The ``KernelConfig`` fields an entry may set."""


def tuned_entry(gpu_name: str) -> tuple[dict | None, str]:
    """``(entry, where)``: the GPU named ``gpu_name``'s entry (``torch.cuda.get_device_name``) in the file
    ``SPECSIM_TRITON_TUNING`` names, else in the shipped file, and where it was found, in words; ``(None, why)``
    where neither holds one (the device then runs ``KernelConfig()``, ``triton_device.config_of``)."""
    return _tuned(gpu_name, os.environ.get(ENV, ""))


@functools.lru_cache(maxsize=None)
def _tuned(gpu_name: str, env_file: str) -> tuple[dict | None, str]:
    for path in ([pathlib.Path(env_file)] if env_file else []) + [SHIPPED]:
        entries = read_entries(path)
        if gpu_name in entries:
            return entries[gpu_name], f"{path.name}: {gpu_name}"
    return None, f"defaults (an H100 sweep): no tuned entry for {gpu_name!r}"


def read_entries(path: pathlib.Path) -> dict:
    """The entries of a tuning file, ``{gpu name: entry}``; a file that is not there has none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if path != SHIPPED and str(path):
            raise ValueError(f"{ENV}={path}: no such file (specsim bench --tune --tune-out FILE writes one)")
        return {}
    try:
        entries = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: must hold an object of GPU names, got {type(entries).__name__}")
    for name, entry in entries.items():
        check_entry(entry, f"{path}: {name!r}")
    return entries


def check_entry(entry: dict, where: str) -> None:
    """A ``ValueError`` naming ``where`` and the rule unless ``entry`` is a well-formed tuned entry."""
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        raise ValueError(f"{where}: an entry must be an object with a 'config' object")
    _check_fields(entry["config"], f"{where} config")
    by_call = entry.get("by_call", {})
    if not isinstance(by_call, dict):
        raise ValueError(f"{where}: 'by_call' must be an object keyed by kind of call ({', '.join(CALL_KEYS)})")
    for key, fields in by_call.items():
        if key not in CALL_KEYS:
            raise ValueError(f"{where}: by_call key {key!r} is not a kind of call ({', '.join(CALL_KEYS)})")
        _check_fields(fields, f"{where} by_call {key}")


def _check_fields(fields: dict, where: str) -> None:
    unknown = sorted(set(fields) - set(TUNED_FIELDS))
    if unknown:
        raise ValueError(f"{where}: {', '.join(unknown)} not a tuned field ({', '.join(TUNED_FIELDS)})")
    for name in ("block", "race_block", "block16"):
        value = fields.get(name)
        if value is not None and (not isinstance(value, int) or value < 32 or value & (value - 1)):
            raise ValueError(f"{where}: {name} must be a power of two ≥ 32 (or null), got {value!r}")
    for name in ("num_warps", "race_warps", "programs", "num_stages"):
        value = fields.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise ValueError(f"{where}: {name} must be an integer ≥ 1 (or null), got {value!r}")
    _check_by_batch(fields.get("programs_by_batch", []), where, "programs_by_batch", ("programs",))
    _check_by_batch(fields.get("race_by_batch", []), where, "race_by_batch", ("race_block", "race_warps"))
    _check_by_batch(fields.get("race_programs_by_batch", []), where, "race_programs_by_batch", ("programs",))


def _check_by_batch(entries, where: str, name: str, values: tuple) -> None:
    """A ``*_by_batch`` field ``name``: ``programs_by_batch`` and ``race_programs_by_batch`` (``[batch, programs]``),
    ``race_by_batch`` (``[batch, race_block, race_warps]``), each a list of such entries of integers ≥ 1, batches
    strictly ascending, a tile a power of two ≥ 32."""
    rule = (f"a list of [{', '.join(('batch',) + values)}] {'pairs' if len(values) == 1 else 'triples'} of integers "
            "≥ 1, batches strictly ascending"
            + (", race_block a power of two ≥ 32" if "race_block" in values else ""))
    if not isinstance(entries, (list, tuple)):
        raise ValueError(f"{where}: {name} must be {rule}, got {entries!r}")
    last = 0
    for entry in entries:
        if (not isinstance(entry, (list, tuple)) or len(entry) != 1 + len(values)
                or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in entry) or entry[0] <= last
                or ("race_block" in values and (entry[1] < 32 or entry[1] & (entry[1] - 1)))):
            raise ValueError(f"{where}: {name} must be {rule}, got {entries!r}")
        last = entry[0]


def entry_of(config, by_call: dict, measured: dict) -> dict:
    """A tuned entry (the form ``read_entries`` reads) for ``config`` (a ``KernelConfig``), its kinds of call
    ``by_call`` (``{key: KernelConfig}``, each written as the fields it changes) and ``measured`` (how)."""
    base = {name: _json(getattr(config, name)) for name in TUNED_FIELDS}
    return {"measured": measured, "config": base,
            "by_call": {key: {n: _json(getattr(c, n)) for n in TUNED_FIELDS if _json(getattr(c, n)) != base[n]}
                        for key, c in sorted(by_call.items())}}


def _json(value):
    """A field's value as the file holds it (the ``*_by_batch`` fields' entries as lists)."""
    return [list(pair) for pair in value] if isinstance(value, tuple) else value


def write_entry(path: pathlib.Path, gpu_name: str, entry: dict) -> None:
    """Add (or replace) ``gpu_name``'s entry in the tuning file ``path``, keeping the others."""
    path = pathlib.Path(path)
    entries = read_entries(path) if path.exists() else {}
    check_entry(entry, f"{path}: {gpu_name!r}")
    entries[gpu_name] = entry
    path.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n", encoding="utf-8")
    _tuned.cache_clear()


__all__ = ["SHIPPED", "ENV", "CALL_KEYS", "TUNED_FIELDS", "tuned_entry", "read_entries", "check_entry",
           "entry_of", "write_entry"]
