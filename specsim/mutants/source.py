"""Mutants of real device code: a named, cited edit of a device module's source, applied to a copy.

A wrapper mutant (``specsim.mutants.zoo``) can only bend what goes into a
device or comes out of it; a bug *inside* a kernel — a swapped residual, an
inclusive comparison, a tile loop that drops its remainder — has to be put
where it lives. A ``SourceMutant`` does that: it reads the device module's
source, replaces each ``Edit.anchor`` (which must occur exactly once) with its
``replacement``, writes the result to a temporary file (Triton's ``@jit`` reads
its kernels' source from a real file) and imports it under a unique name. The
modules that sit between the edited one and the device's factory (``via``,
then ``build``) are re-imported the same way, each seeing the mutated copies
in place of the originals while it executes, so the factory builds a device
that runs the mutated code and nothing else changed. The installed modules
are never touched: the correct device and every other mutant keep running.

An anchor that no longer matches exactly once is a ``StaleAnchor`` naming the
mutant and its module: a refactor cannot silently disarm a mutant
(``tests/stats/test_source_mutants.py`` checks every anchor of the zoo).

>>> m = SourceMutant("coin-inclusive", "u <= ratio", "docs/bugs.md #10", "devices.torch_sampling",
...                  (Edit("return uniforms < t_x", "return uniforms <= t_x"),))
>>> "uniforms <= t_x" in m.mutated_source()
True
>>> SourceMutant("x", "", "", "devices.torch_sampling", (Edit("no such text", ""),)).mutated_source()
Traceback (most recent call last):
...
specsim.mutants.source.StaleAnchor: mutant 'x': anchor 'no such text' occurs 0 times in devices/torch_sampling.py (must be exactly once); update the mutant's anchor in the zoo to the module's current code
"""

from __future__ import annotations

import atexit
import importlib
import importlib.util
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from devices.registry import resolve


class StaleAnchor(AssertionError):
    """A mutant's anchor text no longer occurs exactly once in its module."""


@dataclass(frozen=True)
class Edit:
    """Replace ``anchor`` (exact text, occurring once in the module) with ``replacement``."""

    anchor: str
    replacement: str


@dataclass(frozen=True)
class SourceMutant:
    """One bug, put into a copy of one device module.

    - ``id``, ``bug`` (what the edit does), ``models`` (the report it models: a ``docs/bugs.md`` entry);
    - ``module``: the dotted module edited (``devices.torch_sampling``);
    - ``edits``: applied in order, each anchor matched in the text the previous edits left;
    - ``build``: ``(module, factory)`` that makes the device (default: ``module`` itself);
    - ``via``: modules between ``module`` and ``build`` that import it and must be re-imported too;
    - ``device``: the registry name of the device this mutates (which ``--base`` it belongs to);
    - ``killed_by``: the check that must kill it (``tests/stats/test_mutants.py`` holds it to that);
    - ``env``: environment the device needs while it is built (e.g. ``TRITON_INTERPRET=1``);
    - ``make_from``: ``"module:function"`` called with ``(mutant, mutated_source)`` that builds the
      device itself, for a device that loads its kernels its own way (``interpreted_triton``);
      None: import the copies and call ``build``.
    """

    id: str
    bug: str
    models: str
    module: str
    edits: tuple[Edit, ...]
    build: tuple[str, str] = ("devices.torch_device", "make_cpu_device")
    via: tuple[str, ...] = ()
    device: str = "torch"
    killed_by: str = ""
    env: dict = field(default_factory=dict)
    make_from: str | None = None

    def source_path(self, module: str | None = None) -> Path:
        spec = importlib.util.find_spec(module or self.module)
        if spec is None or spec.origin is None:
            raise ImportError(f"mutant {self.id!r}: module {module or self.module!r} not found")
        return Path(spec.origin)

    def mutated_source(self) -> str:
        """The edited module's text; ``StaleAnchor`` if an anchor does not occur exactly once."""
        text = self.source_path().read_text()
        for edit in self.edits:
            count = text.count(edit.anchor)
            if count != 1:
                shown = edit.anchor if len(edit.anchor) <= 60 else edit.anchor[:57] + "..."
                raise StaleAnchor(f"mutant {self.id!r}: anchor {shown!r} occurs {count} times in "
                                  f"{self.module.replace('.', '/')}.py (must be exactly once); update the "
                                  f"mutant's anchor in the zoo to the module's current code")
            text = text.replace(edit.anchor, edit.replacement)
        return text

    def make(self) -> "MutatedDevice":
        """Build the device from the mutated module (a fresh copy each call)."""
        if self.make_from is not None:
            return MutatedDevice(self, resolve(self.make_from, f"mutant {self.id!r} make_from")(self, self.mutated_source()))
        modules = {self.module: load_copy(self, self.module, self.mutated_source(), {})}
        for name in (*self.via, self.build[0]):
            if name not in modules:
                modules[name] = load_copy(self, name, self.source_path(name).read_text(), modules)
        with _environment(self.env):
            device = getattr(modules[self.build[0]], self.build[1])()
        return MutatedDevice(self, device)


class MutatedDevice:
    """The device built from a mutated module, under the mutant's name; ``id``/``bug``/``models``/``killed_by`` as a wrapper mutant has them."""

    def __init__(self, mutant: SourceMutant, device):
        self.mutant, self.inner = mutant, device
        self.id, self.bug, self.models, self.killed_by = mutant.id, mutant.bug, mutant.models, mutant.killed_by
        self.name = f"mutant:{mutant.id}"
        self.capabilities = device.capabilities

    def verify(self, batch, noise=None):
        with _environment(self.mutant.env):
            return self.inner.verify(batch, noise)

    def verify_tree(self, batch, noise=None):
        """SPEC §11, for mutants of a device declaring ``tree_schemes`` (the tree groups check that first)."""
        with _environment(self.mutant.env):
            return self.inner.verify_tree(batch, noise)


def interpreted_triton(mutant: SourceMutant, source: str, config):
    """The ``triton-interpret`` device running the mutated text of one of its kernel files
    (``devices/triton_kernels.py``, or ``devices/triton_sampler.py`` and the like, which the device
    loads beside it).

    Triton reads a kernel's source back by file name: ``devices.triton_mode.kernel_module``
    executes edited text under its own name (in ``linecache``), in the interpreter, and the
    device launches those kernels. ``config`` (a ``devices.triton_device.KernelConfig``; the zoo's
    mutants pass its ``TRITON_MUTANT_CONFIG``) is the launch shape; the process enters Triton's interpreter mode (as the
    ``triton-interpret`` device does) and raises if it already runs Triton compiled.
    """
    from devices.triton_device import TritonDevice, make_interpreter_device
    from devices.triton_mode import enter, kernel_module
    make_interpreter_device()  # raises, naming why, where this process cannot interpret
    enter(True, "triton-interpret")  # before the edited kernels are decorated
    return TritonDevice("cpu", config, kernel_files={mutant.module: kernel_module(mutant.module, True, source)},
                        name=f"triton-interpret:{mutant.id}")


# --- loading copies -------------------------------------------------------------------

_SCRATCH: list[Path] = []


def _scratch() -> Path:
    if not _SCRATCH:
        _SCRATCH.append(Path(tempfile.mkdtemp(prefix="specsim-mutants-")))
        atexit.register(shutil.rmtree, _SCRATCH[0], ignore_errors=True)
    return _SCRATCH[0]


def load_copy(mutant: SourceMutant, name: str, text: str, replacements: dict):
    """Execute ``text`` as a new module (file under a scratch dir), with ``replacements``
    (original dotted name → mutated module) standing in for the originals while it runs."""
    unique = f"specsim_mutant_{mutant.id.replace('-', '_')}__{name.replace('.', '_')}"
    path = _scratch() / f"{unique}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(unique, path)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = name.rpartition(".")[0]  # relative imports resolve as in the original
    sys.modules[unique] = module  # dataclasses and Triton look their module up by name
    with _standing_in(replacements), _environment(mutant.env):
        spec.loader.exec_module(module)
    return module


class _standing_in:
    """Temporarily bind ``sys.modules[name]`` and the parent package's attribute to the mutated copies."""

    def __init__(self, replacements: dict):
        self.replacements = replacements
        self.saved: list = []

    def __enter__(self):
        for name, module in self.replacements.items():
            importlib.import_module(name)  # the original, so that restoring is exact
            parent, _, leaf = name.rpartition(".")
            self.saved.append((name, sys.modules[name], parent, leaf))
            sys.modules[name] = module
            if parent:
                setattr(sys.modules[parent], leaf, module)
        return self

    def __exit__(self, *exc):
        for name, original, parent, leaf in reversed(self.saved):
            sys.modules[name] = original
            if parent:
                setattr(sys.modules[parent], leaf, original)
        return False


class _environment:
    """Set environment variables for the duration (restored after); Triton reads ``TRITON_INTERPRET`` at call time."""

    def __init__(self, env: dict):
        self.env, self.saved = env, {}

    def __enter__(self):
        import os
        for k, v in self.env.items():
            self.saved[k] = os.environ.get(k)
            os.environ[k] = v
        return self

    def __exit__(self, *exc):
        import os
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False


__all__ = ["Edit", "SourceMutant", "MutatedDevice", "StaleAnchor", "interpreted_triton"]
