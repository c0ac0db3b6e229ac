"""The vLLM loader: pinned wheel members, verified, executed over stand-ins, nothing left behind."""

from __future__ import annotations

import doctest
import shutil
import sys

import pytest

from devices.field import _vllm_standins, remote_wheel, vllm_loader



def test_every_member_matches_its_pin_and_the_wheels_record(cache):
    record = vllm_loader._record_hashes((cache / vllm_loader.RECORD).read_bytes())
    for name in vllm_loader.MODULES:
        data = (cache / name).read_bytes()
        assert record[name] == remote_wheel.member_hash(data), name
        assert vllm_loader._sha256(data) == vllm_loader.PINNED[name], name


def test_a_corrupt_cached_member_is_fetched_again_or_refused(cache, tmp_path):
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    member = copy / "vllm/v1/spec_decode/vocab_mapping.py"
    member.write_bytes(member.read_bytes() + b"\nINJECTED = 1\n")
    assert vllm_loader._cached(copy, "vllm/v1/spec_decode/vocab_mapping.py") is None
    with pytest.raises(vllm_loader.VllmLoadError, match="sha256 .* is not the pinned"):
        vllm_loader._verify("vllm/v1/spec_decode/vocab_mapping.py", member.read_bytes(), None)
    vllm_loader.fetch(copy)          # only the corrupt member travels again
    assert vllm_loader._cached(copy, "vllm/v1/spec_decode/vocab_mapping.py") is not None


def test_vocab_mapping_loads_without_leaving_vllm_in_sys_modules(cache):
    VocabMapping = vllm_loader.load_vocab_mapping()
    assert VocabMapping.__name__ == "VocabMapping" and hasattr(VocabMapping, "constrain_draft_logits")
    assert not [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]


@pytest.mark.needs_extra("triton")   # vLLM's kernels run in Triton's interpreter
def test_stand_ins_for_absent_features_raise_by_name():
    modules = _vllm_standins.build("cpu")
    with pytest.raises(_vllm_standins.StandInError, match="FLy verification"):
        modules["vllm.v1.spec_decode.fly"].compute_fly_entropy()
    with pytest.raises(_vllm_standins.StandInError, match="vllm.envs.VLLM_USE_FLASHINFER_SAMPLER"):
        modules["vllm.envs"].VLLM_USE_FLASHINFER_SAMPLER


def test_a_server_ignoring_range_requests_is_refused(monkeypatch):
    class Whole:
        status = 200
        def __enter__(self): return self
        def __exit__(self, *a): return False
        def read(self): return b"x" * 10
    monkeypatch.setattr(remote_wheel.urllib.request, "urlopen", lambda *a, **k: Whole())
    with pytest.raises(remote_wheel.WheelFetchError, match="expected a 206 partial answer"):
        remote_wheel._get_range("https://example.invalid/w.whl", 0, 10)


@pytest.mark.parametrize("module", [remote_wheel, _vllm_standins], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


@pytest.mark.needs_extra("triton")   # vLLM's kernels run in Triton's interpreter
def test_vllms_own_kernel_runs_in_the_interpreter_in_a_fresh_process(cache):
    """``expand_batch_to_tokens`` (vLLM's ``expand_kernel``), loaded in a process of its own so this
    one's Triton mode stays undecided: [a, b, c] with cu = [2, 5, 6] → [a, a, b, b, b, c]."""
    import subprocess
    code = ("import torch\n"
            "from devices.field.vllm_loader import load_rejection_sampler\n"
            "rs = load_rejection_sampler(interpret=True).rejection_sampler\n"
            "x = rs.expand_batch_to_tokens(torch.tensor([7., 0., 9.]), torch.tensor([2, 5, 6], dtype=torch.int32), 6,"
            " replace_from=0, replace_to=1)\n"
            "print(x.tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[7.0, 7.0, 1.0, 1.0, 1.0, 9.0]"
