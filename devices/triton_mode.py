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


__all__ = ["interpreting", "conflict", "enter", "kernel_module"]
