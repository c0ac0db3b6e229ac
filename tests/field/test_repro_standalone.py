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
    "transformers_spec_edges.py": (["--samples", "100"], ("4 of 4 edges leave SPEC's support",)),
    "transformers_assistant_warpers_twice.py": ([], ("q == warpers twice",)),
    "transformers_gemma4_assistant_argmax_drafts.py": (["--seeds", "100"], ("100 of 100 are argmax q", "NOT lossless")),
    "vllm_zero_coin_accepts_masked_token.py": ([], ("got: emitted [2, 0]",)),
    "vllm_min_tokens_bonus_reads_pre_step_output.py": ([], ("expected: [1, 1, 3]", "got:      [1, 1, 1]")),
    "vllm_global_rng_consumed_with_every_request_seeded.py": ([], ("got: random_sample: global generator unchanged",
                                                                   "got: rejection_sample: global generator advanced")),
    "vllm_probabilistic_drafts_ignore_request_seed.py": ([], ("control: vLLM's random_sample with the request's "
                                                              "generator: the same draws", "got: drafts differ at")),
}


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
    assert out.returncode == 1 and all(s in out.stdout for s in EXPECTED[script][1]), out.stdout + out.stderr[-3000:]


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_missing_engine_exits_3_never_1(script, tmp_path):
    """Exit 1 means the bug is present; an engine that does not import is exit 3 (nothing was checked)."""
    if reports.importable_standalone(engine_of(script)):
        pytest.skip(f"{engine_of(script)} is installed here: the run above checks the bug")
    run = reports.run_standalone(REPRO / script, timeout=120)
    assert run.returncode == reports.MISSING_DEPENDENCY and "missing dependency" in run.output, run.output[-2000:]
