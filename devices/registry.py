"""Device registry: built-in names, the ``specsim.devices`` entry-point group,
and ``"module:attr"`` strings — all loaded lazily, failures listed, never
swallowed.

A spec names a device three ways:

* a built-in name: ``"torch"``;
* an entry point a vendor declares in their own ``pyproject.toml``::

      [project.entry-points."specsim.devices"]
      acme-npu = "acme_specsim.device:make_device"

* a ``"module:attr"`` string: ``"acme_specsim.device:make_device"``. A module found nowhere on the import
  path is looked for in the current directory too (``specsim conform --device acme_dev:make_device`` run
  from ``acme_dev.py``'s directory), as ``python -m`` would; it never shadows an installed module.

The attribute is a factory (a function or a class, called with no arguments) or a device instance.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from dataclasses import dataclass
from importlib import metadata

from devices.protocol import Capabilities, Device

BUILTIN: dict[str, str] = {
    "torch": "devices.torch_device:make_cpu_device",
    "torch-cuda": "devices.torch_device:make_cuda_device",
    "triton": "devices.triton_device:make_device",
    "triton-interpret": "devices.triton_device:make_interpreter_device",
    "hpu": "devices.hpu_device:make_device",
    "npu": "devices.npu_device:make_device",
}
"""Built-in devices; a name whose module is not in this checkout is listed as unavailable."""

EMULATED: frozenset[str] = frozenset({"triton-interpret"})
"""Built-ins that emulate a GPU on CPU (Triton's interpreter, numpy per program): listed and loadable,
but too slow for runs over every device (``specsim mutants``' correct devices); name them to run them."""

FIELD: dict[str, str] = {
    "transformers": "devices.field.hf_transformers:make_device",
    "vllm": "devices.field.vllm_device:make_device",
    "vllm-interpret": "devices.field.vllm_device:make_interpreter_device",
    "vllm-v2": "devices.field.vllm_v2_device:make_device",
    "vllm-v2-interpret": "devices.field.vllm_v2_device:make_interpreter_device",
    "flashinfer": "devices.field.flashinfer_device:make_device",
    "sglang": "devices.field.sglang_device:make_device",
}
"""The field adapters, as this package's ``pyproject.toml`` declares them (entry points of ``specsim.devices``).
Known here too because an editable install's entry points are those of the metadata written when it was
installed: a checkout that adds an adapter lists it without reinstalling. An installed entry point of the same
name and target is the same declaration, not a clash."""

FIELD_PACKAGE = "devices.field."
"""Adapters of the field's real samplers (vLLM, FlashInfer, SGLang, transformers: ``devices/field/``): their
code is another project's, held to SPEC and reported in docs/field.md, never a 'correct device' of specsim."""

ENTRY_POINT_GROUP = "specsim.devices"


class DeviceLoadError(RuntimeError):
    """A device spec could not be turned into a device; the message says why."""


@dataclass(frozen=True)
class Entry:
    name: str
    target: str  # "module:attr"
    origin: str  # "builtin" or "entry point (distribution)"


def entries() -> dict[str, Entry]:
    """Every known device name → where it lives. Duplicate names are an error."""
    found = {name: Entry(name, target, "builtin") for name, target in BUILTIN.items()}
    found.update({name: Entry(name, target, "field adapter") for name, target in FIELD.items()})
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        origin = f"entry point ({dist.name if dist else '?'})"
        if ep.name in FIELD and ep.value == FIELD[ep.name]:
            continue   # this package's own declaration, read from its installed metadata
        if ep.name in found:
            raise DeviceLoadError(f"device name {ep.name!r} from {origin} is already registered by {found[ep.name].origin}")
        found[ep.name] = Entry(ep.name, ep.value, origin)
    return found


class UnresolvedTarget(LookupError):
    """A ``"module:attr"`` string that names nothing importable. ``missing`` is what is absent (the module, or
    the module's attribute); ``None`` when the string is malformed or the module raised while importing."""

    def __init__(self, message: str, missing: str | None = None):
        super().__init__(message)
        self.missing = missing


def resolve(target: str, what: str = "target") -> object:
    """The object a ``"module:attr"`` string names (``attr`` may be dotted): the one resolver of every lazy
    registry here and in specsim (devices, conformance groups, commands, proposers, mutants).

    ``what`` names the argument in the error (``"device spec"``, ``"group 'L1'"``).

    >>> resolve("devices.protocol:Capabilities.__name__")
    'Capabilities'
    >>> resolve("devices.protocol", "device spec")
    Traceback (most recent call last):
    ...
    devices.registry.UnresolvedTarget: device spec 'devices.protocol': expected 'module:attr'
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UnresolvedTarget(f"{what} {target!r}: expected 'module:attr'")
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        missing = e.name if e.name is not None and module_name.startswith(e.name) else None
        raise UnresolvedTarget(f"{what} {target!r}: importing {module_name!r} failed: {said(e)}", missing) from e
    except Exception as e:
        raise UnresolvedTarget(f"{what} {target!r}: importing {module_name!r} failed: {said(e)}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            raise UnresolvedTarget(f"{what} {target!r}: module {module_name!r} has no attribute {attr!r}",
                                   f"{module_name}:{attr}") from e
    return obj


def said(e: BaseException) -> str:
    """An exception as one line, its type and message: ``RuntimeError: needs triton``.

    >>> said(ModuleNotFoundError("No module named 'acme_dev'"))
    "ModuleNotFoundError: No module named 'acme_dev'"
    """
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def _current_directory_searched() -> bool:
    """Whether imports already look in the current directory (``python -m`` and ``python -c`` put it on
    the path; the ``specsim`` script does not)."""
    here = os.getcwd()
    return any(os.path.abspath(p or os.curdir) == here for p in sys.path)


def _resolve_device(target: str) -> object:
    """``resolve(target)``; a module missing from the import path is looked for in the current directory
    too, appended last so that it never shadows an installed module. Still missing: the error says where
    it was looked for."""
    top = target.partition(":")[0].split(".")[0]
    try:
        return resolve(target, "device spec")
    except UnresolvedTarget as e:
        error = e
    if error.missing == top and not _current_directory_searched():
        sys.path.append(os.getcwd())
        try:
            return resolve(target, "device spec")
        except UnresolvedTarget as e:
            error = e
    hint = (f" (looked for it on the import path and in the current directory, {os.getcwd()}: run from the "
            "module's directory, or put its directory on PYTHONPATH)") if error.missing == top else ""
    raise DeviceLoadError(f"{error}{hint}") from error


PROTOCOL_ATTRIBUTES = ("name", "capabilities", "verify")
"""What a device has (``devices.protocol.Device``)."""


def lacking(obj: object) -> list[str]:
    """Which of ``name``, ``capabilities`` and ``verify`` an object lacks (``verify`` must be callable).

    >>> class Half:
    ...     name = "half"
    ...     verify = None
    >>> lacking(Half())
    ['capabilities', 'verify (not callable)']
    """
    out = [a for a in PROTOCOL_ATTRIBUTES if not hasattr(obj, a)]
    if "verify" not in out and not callable(getattr(obj, "verify")):
        out.append("verify (not callable)")
    return out


def load(spec: str) -> Device:
    """Turn a device spec into a device, checking it honours the protocol."""
    known = entries()
    target = known[spec].target if spec in known else spec
    if ":" not in target:
        raise DeviceLoadError(f"unknown device {spec!r}: not a registered name ({', '.join(sorted(known))}) "
                              "and not a 'module:attr' string")
    obj = _resolve_device(target)
    if isinstance(obj, type) or (lacking(obj) and callable(obj)):
        try:
            obj = obj()  # a factory
        except DeviceLoadError as e:  # the factory's own account of why (an engine release it cannot run)
            raise DeviceLoadError(f"device spec {spec!r}: {e}") from None
        except Exception as e:
            raise DeviceLoadError(f"device spec {spec!r}: calling {target} failed: {said(e)}") from e
    missing = lacking(obj)
    if missing:
        raise DeviceLoadError(f"device spec {spec!r}: {target} gave {type(obj).__name__}, which lacks "
                              f"{', '.join(missing)}: a device has name, capabilities and verify "
                              "(see devices/protocol.py)")
    if not isinstance(obj.capabilities, Capabilities):
        raise DeviceLoadError(f"device spec {spec!r}: capabilities must be devices.protocol.Capabilities, "
                              f"got {type(obj.capabilities).__name__}")
    return obj


@dataclass(frozen=True)
class Availability:
    entry: Entry
    device: Device | None
    error: str | None  # why it is unavailable: the load error, in full


def survey() -> list[Availability]:
    """Try to load every known device; report each with its device or its error."""
    out = []
    for entry in entries().values():
        try:
            out.append(Availability(entry, load(entry.name), None))
        except DeviceLoadError as e:
            out.append(Availability(entry, None, load_error_text(e)))
    return out


def load_error_text(e: DeviceLoadError) -> str:
    """A load error in full, its cause said once: appended in brackets only where the message leaves it out."""
    cause = e.__cause__
    if cause is None or str(cause) in str(e):
        return str(e)
    tail = "".join(traceback.format_exception_only(type(cause), cause)).strip()
    return f"{e} [{tail}]"


def is_field(availability: "Availability") -> bool:
    """Whether a surveyed device is a field adapter (its target in ``devices.field``, or it names its ``engine``)."""
    return (availability.entry.target.startswith(FIELD_PACKAGE)
            or getattr(availability.device, "engine", None) is not None)


def load_failures() -> dict[str, str]:
    """Names of devices that could not be loaded, with why."""
    return {a.entry.name: a.error for a in survey() if a.error}
