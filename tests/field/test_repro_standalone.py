"""The reproductions in ``devices/field/repro/`` are standalone: each runs against the engine's installed
package with none of this project's packages importable (``python -I -S`` from a scratch directory, only
site-packages on the path, specsim's packages refused), prints expected vs got, and exits 1 on the pinned
releases CI installs (transformers 5.23.0). The vLLM ones need vLLM 0.33.0 installed that way (and a GPU):
skipped here with that reason; the same files run on the pinned wheel's members through
``devices/field/repro/on_vllm_members.py`` below (and in test_vllm_device.py, test_vllm_sampler.py)."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

from specsim.field import upstream as reports

REPRO = reports.repro_dir()
RUNNER = "on_vllm_members.py"
SCRIPTS = sorted(p.name for p in REPRO.glob("*.py") if p.name not in ("__init__.py", RUNNER))

EXPECTED = {   # script: (arguments, what its output says while the deviation is present)
    "transformers_spec_edges.py": (["--samples", "100"], ("5 of 5 edges leave SPEC's support",)),
    "transformers_assistant_warpers_twice.py": ([], ("q == warpers twice",)),
    "transformers_gemma4_assistant_argmax_drafts.py": (["--seeds", "100"], ("100 of 100 are argmax q", "NOT lossless")),
    "vllm_zero_coin_accepts_masked_token.py": ([], ("got: emitted [2, 0]",)),
    "vllm_empty_residual_emits_token_zero.py": ([], ("draft_probs[2] == 1.0: True", "got: emitted [0]")),
    "vllm_min_tokens_bonus_reads_pre_step_output.py": ([], ("expected: [1, 1, 3]", "got:      [1, 1, 1]")),
    "vllm_global_rng_consumed_with_every_request_seeded.py": ([], ("got: random_sample: global generator unchanged",
                                                                   "got: rejection_sample: global generator advanced")),
    "vllm_probabilistic_drafts_ignore_request_seed.py": ([], ("control: vLLM's random_sample with the request's "
                                                              "generator: the same draws", "got: drafts differ at")),
    "vllm_v1_offsets_past_2_31.py": ([], ("the draft rows cross 2^31 elements in request 2092", "BUG: ")),
}
NEEDS_CUDA = {"vllm_v1_offsets_past_2_31.py": "a CUDA GPU with about 22 GiB free (2^31-element rows)"}
"""Reproductions whose bug lives in compiled kernels at sizes the interpreter cannot hold: without CUDA they exit 3."""


def cuda() -> bool:
    import torch
    return torch.cuda.is_available()


def engine_of(script: str) -> str:
    return script.split("_")[0]


def test_every_reproduction_is_listed_here():
    assert set(SCRIPTS) == set(EXPECTED)


@pytest.mark.parametrize("script", SCRIPTS)
def test_no_reproduction_imports_this_project(script):
    tree = ast.parse((REPRO / script).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & set(reports.OUR_PACKAGES), imported
    assert engine_of(script) in imported and "--specsim-loader" not in (REPRO / script).read_text()


def with_its_extra(script: str):
    """A transformers reproduction needs transformers (an extra CI installs); a vLLM one needs vLLM itself and a GPU."""
    marks = [pytest.mark.needs_extra("transformers")] if engine_of(script) == "transformers" else []
    return pytest.param(script, marks=marks)


@pytest.mark.parametrize("script", [with_its_extra(s) for s in SCRIPTS])
def test_each_reproduction_exits_1_standalone_on_the_pinned_release(script):
    engine = engine_of(script)
    if not reports.importable_standalone(engine):
        pytest.skip("needs vllm==0.33.0 installed (and a CUDA GPU); its run on the pinned wheel's members is "
                    "test_vllm_reproductions_on_the_wheels_members" if engine == "vllm" else
                    f"needs {engine} installed (CI installs the pinned release: .ci/extras.sh)")
    args, says = EXPECTED[script]
    run = reports.run_standalone(REPRO / script, args, timeout=300)
    if script in NEEDS_CUDA and not cuda():
        assert run.returncode == reports.MISSING_DEPENDENCY and "missing dependency" in run.output, run.output[-3000:]
        return
    assert run.returncode == 1 and all(s in run.output for s in says), run.output[-3000:]
    if script == "transformers_assistant_warpers_twice.py":   # at T = 0.7 and at T = 1.1 with top-p 0.8
        assert run.output.count("q == warpers twice") == 2, run.output


@pytest.mark.needs_extra("triton")   # vLLM's kernels run in Triton's interpreter
@pytest.mark.parametrize("script", [s for s in SCRIPTS if engine_of(s) == "vllm"])
def test_vllm_reproductions_on_the_wheels_members(script, cache):
    """The same files, unchanged, on vLLM 0.33.0's modules out of the pinned wheel (Triton's interpreter here)."""
    root = str(pathlib.Path(reports.__file__).parents[2])   # this checkout, not an installed one
    out = subprocess.run([sys.executable, "-m", "devices.field.repro.on_vllm_members", str(REPRO / script)],
                         capture_output=True, text=True, timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": root})
    if script in NEEDS_CUDA and not cuda():   # nothing checked in the interpreter: exit 3, never 1
        assert out.returncode == reports.MISSING_DEPENDENCY and "a CUDA GPU" in out.stdout, out.stdout + out.stderr
        return
    assert out.returncode == 1 and all(s in out.stdout for s in EXPECTED[script][1]), out.stdout + out.stderr[-3000:]


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_missing_engine_exits_3_never_1(script, tmp_path):
    """Exit 1 means the bug is present; an engine that does not import is exit 3 (nothing was checked)."""
    if reports.importable_standalone(engine_of(script)):
        pytest.skip(f"{engine_of(script)} is installed here: the run above checks the bug")
    run = reports.run_standalone(REPRO / script, timeout=120)
    assert run.returncode == reports.MISSING_DEPENDENCY and "missing dependency" in run.output, run.output[-2000:]


SMALL_OFFSETS = """
import runpy, sys
import torch   # before the stand-ins: torch's lazy submodules inspect every module in sys.modules
from devices import triton_mode
from devices.field import _vllm_standins as standins, vllm_loader
triton_mode.enter(True, "offsets reproduction at a small boundary")
vllm_loader.interpreter_scalars_as_compiled()
with standins.installed(vllm_loader.member_modules("cpu")):
    run_step = runpy.run_path(sys.argv[1], run_name="offsets_small")["run_step"]
    script = run_step.__globals__
    script["BOUNDARY"], script["VOCAB"] = 2**12, 100
    first_past, batch, num_tokens = script["layout"]()
    got = run_step(first_past, batch, num_tokens, device="cpu")
    print(first_past, batch, num_tokens, got == script["expected_rows"](first_past, batch))
"""


@pytest.mark.needs_extra("triton")   # vLLM's kernels run in Triton's interpreter
def test_the_offsets_reproductions_lossless_answer_is_vllms_own_below_the_wrap(cache):
    """The offsets reproduction's batch at a boundary of 2^12 elements (V = 100): no offset wraps there, so vLLM's
    own rejection_sample must emit exactly the answer the script expects, request for request."""
    root = str(pathlib.Path(reports.__file__).parents[2])
    out = subprocess.run([sys.executable, "-c", SMALL_OFFSETS, str(REPRO / "vllm_v1_offsets_past_2_31.py")],
                         capture_output=True, text=True, timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0 and out.stdout.split()[-4:] == ["5", "10", "80", "True"], out.stdout + out.stderr[-3000:]


def test_the_offsets_reproduction_builds_the_recorded_batch():
    """2097 requests of 8 drafts at V = 128256, the draft rows crossing 2^31 in request 2092 (the H200 run's
    batch), every judged token past the wrap even in the straddling row."""
    import runpy
    script = runpy.run_path(str(REPRO / "vllm_v1_offsets_past_2_31.py"), run_name="offsets_layout")
    first_past, batch, num_tokens = script["layout"]()
    assert (first_past, batch, num_tokens) == (2092, 2097, 16776)
    vocab = script["VOCAB"]
    assert (first_past * 8 + 7) * vocab < 2**31 <= (first_past * 8 + 8) * vocab   # its last row straddles
    tokens = script["judged_tokens"](first_past, batch)
    assert min(map(min, tokens)) > 2**31 - 1 - (first_past * 8 + 7) * vocab and 0 not in sum(tokens, [])
    assert script["bytes_needed"](batch, num_tokens) < 23 * 2**30
