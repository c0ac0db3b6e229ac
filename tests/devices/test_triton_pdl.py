"""The plain step's programmatic dependent launch, in the compiled code: ``step_kernel`` may start while
``stats_kernel`` runs, so nothing it reads from what that grid writes (statistics, the zeroed counter) may be
loaded before its ``griddepcontrol.wait``. A load moved above the wait — by an edit of the source or by the
compiler — would read the statistics early, and only now and then: a race that a run of the suite can miss.
This reads the sm_90 PTX (``tools/triton_ptx.py --show``, no GPU needed) and traces each global load's address
back to the kernel parameters it is computed from."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.needs_extra("triton")

ROOT = Path(__file__).resolve().parents[2]
WRITTEN_BY_STATS = ("stat_max_ptr", "stat_sum_ptr", "stat_arg_ptr", "counter_ptr")
GATHERED_BEFORE = ("draft_ids_ptr", "logits_ptr")
REGISTER = re.compile(r"%[a-z]+\d+")


def ptx_of(label: str) -> str:
    env = dict(os.environ, TRITON_INTERPRET="0")
    run = subprocess.run([sys.executable, str(ROOT / "tools/triton_ptx.py"), "--show", label, str(ROOT)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def parameter_names(label: str) -> list[str]:
    """``step_kernel``'s PTX parameters in order, as ``tools/triton_ptx.py`` compiles launch ``label``: its
    arguments the launch gives a type (every other is a constexpr)."""
    import ast
    import importlib.util
    spec = importlib.util.spec_from_file_location("triton_ptx", ROOT / "tools/triton_ptx.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    _, pointers, _ = tool.launches()[label]
    tree = ast.parse((ROOT / "devices/triton_kernels.py").read_text())
    kernel = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "step_kernel")
    return [a.arg for a in kernel.args.args if a.arg in pointers]


def global_loads(ptx: str, names: list[str]) -> tuple[list[tuple[int, set]], list[int]]:
    """``([(line, parameters its address comes from)], [lines of griddepcontrol.wait])``: a register's sources
    are every register any instruction writing it reads (PTX reuses registers in loops: a superset)."""
    sources: dict[str, set] = {}
    roots: dict[str, set] = {}
    loads, waits = [], []
    lines = ptx.splitlines()
    for i, line in enumerate(lines):
        text = re.sub(r"^\s*@!?%p\d+\s+", "", line.split("//")[0]).strip().rstrip(";")
        if not text or text.startswith((".", "$", "{", "}")):
            continue
        if "griddepcontrol.wait" in text:
            waits.append(i)
            continue
        op, _, rest = text.partition(" ")
        param = re.search(r"\[step_kernel_param_(\d+)\]", rest)
        if op.startswith("ld.param") and param:
            roots.setdefault(REGISTER.findall(rest)[0], set()).add(names[int(param.group(1))])
            continue
        if op.startswith("ld.global"):
            address = re.search(r"\[\s*(%[a-z]+\d+)", rest)
            loads.append((i, address.group(1)))
        registers = REGISTER.findall(rest)
        if registers and not op.startswith(("st.", "red.", "atom.", "setp", "bra")):
            sources.setdefault(registers[0], set()).update(registers[1:])

    def origin(register: str, seen: set) -> set:
        if register in seen:
            return set()
        seen.add(register)
        out = set(roots.get(register, ()))
        for source in sources.get(register, ()):
            out |= origin(source, seen)
        return out

    return [(i, origin(address, set())) for i, address in loads], waits


@pytest.mark.parametrize("label", [f"step_kernel {mode} {noise} PDL" for mode in ("draft", "point")
                                   for noise in ("keyed", "injected")])
def test_nothing_the_statistics_pass_writes_is_read_before_the_wait(label):
    loads, waits = global_loads(ptx_of(label), parameter_names(label))
    assert len(waits) == 1, f"{label}: {len(waits)} griddepcontrol.wait"
    wait = waits[0]
    early = [(i, sorted(p)) for i, p in loads if i < wait and p & set(WRITTEN_BY_STATS)]
    assert not early, f"{label}: loads of what stats_kernel writes before griddepcontrol.wait (line, from): {early}"
    assert any(p & set(WRITTEN_BY_STATS) for i, p in loads if i > wait), "no statistics load found: the trace is blind"
    before = set().union(*(p for i, p in loads if i < wait))
    assert set(GATHERED_BEFORE) <= before, f"{label}: the walk's gathers are not made before the wait: {before}"


def test_without_pdl_the_step_never_waits():
    label = "step_kernel draft keyed"
    _, waits = global_loads(ptx_of(label), parameter_names(label))
    assert waits == []
