"""Which way this process runs Triton kernels — compiled for a GPU, or in Triton's
CPU interpreter — decided explicitly by the device that needs it, never by a
test module's side effect.

Triton fixes the mode once per process: ``@triton.jit`` reads
``TRITON_INTERPRET`` when a kernel is decorated, and ``triton.language``'s own
helpers (``tl.sum``, ``tl.philox``…) are decorated when it is first imported.
An interpreted kernel cannot call a compiled helper, nor the reverse. So a
module that set ``TRITON_INTERPRET=1`` at import switched every Triton kernel
of the process to the interpreter — ``pytest --specsim-device=triton`` on a
GPU ran the CPU interpreter. So:

* ``enter(interpret, who)`` puts an undecided process (``triton.language`` not
  imported yet) into the mode ``who`` needs — for the interpreter it sets
  ``TRITON_INTERPRET=1`` for the rest of the process, so that every kernel
  decorated later agrees — and raises, naming both modes, when the process
  is already in the other one. Compiled mode is never entered while
  ``TRITON_INTERPRET=1`` is set: that would silently run the interpreter.
* ``kernel_module(name, interpret)`` executes a private copy of a kernel
  module in a given mode (cached), whatever the variable says now; ``source``
  executes edited text instead of the file (a mutant of the kernels).

>>> enter(interpret=True, who="triton-interpret")                  # doctest: +SKIP
>>> type(kernel_module("devices.triton_kernels", True).step_kernel).__name__  # doctest: +SKIP
'InterpretedFunction'
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import linecache
import os
import sys
import threading
from collections import defaultdict
from contextlib import contextmanager
from types import ModuleType

_LOCK = threading.Lock()
_CACHE: dict[tuple[str, bool, str | None], ModuleType] = {}


def interpreting() -> bool | None:
    """This process's Triton mode: True interpreter, False compiled, None not decided yet."""
    if "triton.language" not in sys.modules:
        return None
    import triton.language as tl
    return type(tl.philox).__name__ == "InterpretedFunction"


def _env_says_interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes", "y")


def conflict(interpret: bool, who: str) -> str | None:
    """Why this process cannot run Triton the way ``who`` needs (None: it can), without
    importing triton (which would decide the mode)."""
    mode = interpreting()
    if not interpret and (mode is True or (mode is None and _env_says_interpret())):
        return (f"{who}: TRITON_INTERPRET=1 here makes Triton run its CPU interpreter; {who} is the compiled "
                "kernels — unset it (the interpreter is the device 'triton-interpret')")
    if interpret and mode is False:
        return (f"{who}: this process already runs Triton compiled (triton was imported without "
                "TRITON_INTERPRET=1), and a process cannot run both; use a fresh process")
    return None


def enter(interpret: bool, who: str) -> None:
    """Put this process in ``interpret`` mode if undecided; raise ``RuntimeError`` if it cannot be."""
    with _LOCK:
        why = conflict(interpret, who)
        if why:
            raise RuntimeError(why)
        if interpreting() is None:
            if interpret:  # for the rest of the process: kernels decorated later must agree
                os.environ["TRITON_INTERPRET"] = "1"
            importlib.import_module("triton.language")


def kernel_module(name: str, interpret: bool, source: str | None = None) -> ModuleType:
    """A private copy of module ``name`` with its ``@triton.jit`` kernels interpreted or
    compiled; the process must be in that mode (``enter``) before they run."""
    digest = None if source is None else hashlib.sha256(source.encode()).hexdigest()[:16]
    key = (name, interpret, digest)
    with _LOCK:
        if key not in _CACHE:
            _CACHE[key] = _execute(name, interpret, source, digest)
        return _CACHE[key]


def _execute(name: str, interpret: bool, source: str | None, digest: str | None) -> ModuleType:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise ImportError(f"kernel_module: no module {name!r}")
    module = importlib.util.module_from_spec(spec)
    filename = spec.origin
    if source is None:
        with open(filename, encoding="utf-8") as f:
            source = f.read()
    else:  # Triton and its interpreter read a kernel's source back by file name and line
        filename = f"{spec.origin}<edited {digest}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        module.__file__ = filename
    code = compile(source, filename, "exec")
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        exec(code, module.__dict__)
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
    return module




def launch_key(function, args: tuple, kwargs: dict) -> tuple:
    """The key a compiled launch of ``function`` (an interpreted ``@triton.jit`` kernel) with these
    arguments compiles for: each constexpr's value and, for every other argument, what Triton's launcher
    reads off it (an integer's being 1 or a multiple of 16, a pointer's 16-byte alignment), unless the
    kernel names it in ``do_not_specialize`` / ``do_not_specialize_on_alignment``. Triton's own
    ``native_specialize_impl`` computes it, so no GPU is needed."""
    import inspect

    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    signature = inspect.signature(function.fn)
    bound = signature.bind(*args, **{k: v for k, v in kwargs.items() if k not in _LAUNCH_OPTIONS})
    bound.apply_defaults()
    plain = set(function.kwargs.get("do_not_specialize") or ())
    unaligned = set(function.kwargs.get("do_not_specialize_on_alignment") or ())
    key = []
    for i, (name, value) in enumerate(bound.arguments.items()):
        if "constexpr" in str(signature.parameters[name].annotation):
            key.append((name, value))
            continue
        specialise, align = not ({name, i} & plain), not ({name, i} & unaligned)
        key.append((name, native_specialize_impl(BaseBackend, value, False, specialise, align)[:2]))
    return tuple(key)


_LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")


@contextmanager
def recorded_launches():
    """Inside, every launch of an interpreted kernel adds its ``launch_key`` to the yielded dict
    (kernel name → set of keys): the compiled variants the same calls would ask a GPU for. The process
    must be in interpreter mode."""
    from triton.runtime.interpreter import InterpretedFunction
    seen: dict[str, set] = defaultdict(set)
    original = InterpretedFunction.run

    def recording(self, *args, grid, warmup, **kwargs):
        seen[self.fn.__name__].add(launch_key(self, args, kwargs))
        return original(self, *args, grid=grid, warmup=warmup, **kwargs)

    InterpretedFunction.run = recording
    try:
        yield seen
    finally:
        InterpretedFunction.run = original


__all__ = ["interpreting", "conflict", "enter", "kernel_module", "launch_key", "recorded_launches"]
