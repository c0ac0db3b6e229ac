"""vLLM 0.33.0's Model Runner V2 verifier through the ``vllm-v2-interpret`` device (Triton's CPU interpreter):
registration, the layout, and deterministic answers against the reference (greedy rows, min_tokens at every
row with the bonus row included, a placeholder); the conformance groups run through ``specsim field``
(docs/field.md)."""

from __future__ import annotations

import doctest
import os
import pathlib
import subprocess
import sys
import tomllib

import numpy as np
import pytest

from devices import registry
from devices.field import _vllm_standins, vllm_v2_device, vllm_v2_loader
from devices.field.vllm_loader import V2_PINNED, VLLM_WHEEL
from specsim.conformance.verdict.waivers import JUDGEMENTS, load

ROOT = pathlib.Path(__file__).resolve().parents[2]
WAIVERS = pathlib.Path(vllm_v2_device.__file__).with_name("vllm_v2_waivers.toml")


def test_the_project_declares_both_v2_devices_and_the_registry_knows_them_without_a_reinstall():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["specsim.devices"]
    assert declared == registry.FIELD
    entries = registry.entries()
    assert entries["vllm-v2"].target == "devices.field.vllm_v2_device:make_device"
    assert entries["vllm-v2-interpret"].target == "devices.field.vllm_v2_device:make_interpreter_device"


def test_the_projects_own_installed_entry_point_is_one_declaration_and_a_clash_still_an_error(monkeypatch):
    from importlib import metadata
    own = metadata.EntryPoint("vllm-v2", registry.FIELD["vllm-v2"], registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group: [own])
    assert registry.entries()["vllm-v2"].origin == "field adapter"
    other = metadata.EntryPoint("vllm-v2", "acme.device:make_device", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry.metadata, "entry_points", lambda group: [other])
    with pytest.raises(registry.DeviceLoadError, match="'vllm-v2' .* is already registered"):
        registry.entries()


def test_every_executed_v2_member_is_pinned():
    assert set(vllm_v2_loader.V2_MODULES) <= set(VLLM_WHEEL.pins)
    assert set(V2_PINNED) <= set(vllm_v2_loader.V2_MODULES)


@pytest.mark.parametrize("module", [vllm_v2_device, _vllm_standins], ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


def test_the_rows_positions_and_input_tokens_follow_v2s_layout():
    """K = [2, 0]; request 0 has prompt [5, 6] and output [7]: its rows sit at positions 2, 3, 4 (the input
    token's), fed 7 (the last committed token) then its drafts; request 1 has no tokens: its row at −1."""
    from devices.protocol import SamplerParams, VerifyBatch
    batch = VerifyBatch(np.array([2, 0]), np.array([1, 3]), None, np.zeros((4, 8), np.float32), np.ones(2),
                        np.zeros(2, np.int64), np.ones(2), np.array([1, 2], np.uint64), np.array([9, 9]),
                        SamplerParams(prompt_token_ids=(np.array([5, 6]), None), output_token_ids=(np.array([7]), None),
                                      repetition_penalty=np.array([1.5, 1.0])))
    layout = vllm_v2_device.Layout(batch)
    assert layout.positions().tolist() == [2, 3, 4, -1]
    assert layout.input_ids().tolist() == [7, 1, 3, -1]
    assert layout.cu_num_logits.tolist() == [0, 3, 4] and layout.local_pos.tolist() == [0, 1, 2, 0]
    params = vllm_v2_device.sampling_params(batch, 0)
    assert params.repetition_penalty == 1.5 and params.seed == vllm_v2_device.generator_seed(1, 9)


def test_the_drafters_logits_sit_at_each_requests_slot_scaled_by_its_temperature():
    """V2 reads ``draft_logits[req_state_idx, step]``: request i's rows go to its slot, T · log q."""
    from devices.protocol import VerifyBatch
    q = np.array([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0], [0.2, 0.2, 0.6]], np.float32)
    batch = VerifyBatch(np.array([2, 1]), np.array([0, 1, 2]), q, np.zeros((5, 3), np.float32), np.array([2.0, 0.5]),
                        np.zeros(2, np.int64), np.ones(2), np.array([1, 2], np.uint64), np.array([0, 0]))
    out = vllm_v2_device.draft_logits(batch, vllm_v2_device.Layout(batch), np.array([1, 0]), "cpu").numpy()
    with np.errstate(divide="ignore"):
        assert np.array_equal(out[1], np.float32(2.0 * np.log(q[:2].astype(np.float64))))
        assert np.array_equal(out[0, 0], np.float32(0.5 * np.log(q[2].astype(np.float64))))


def test_v2s_own_limits_are_refused_by_name():
    from devices.protocol import UnsupportedCall
    import types
    params = types.SimpleNamespace(allowed_token_ids=list(range(1025)), min_tokens=0, all_stop_token_ids=set(),
                                   bad_words_token_ids=None)
    with pytest.raises(UnsupportedCall, match="allowed_token_ids: at most 1024"):
        vllm_v2_device.check_v2_limits(params, 0)


GLUE = """
import numpy as np
from devices.field.vllm_v2_device import make_interpreter_device
from devices.protocol import SamplerParams, VerifyBatch
from specsim.judge.compare import reference_step

device = make_interpreter_device()
rng = np.random.default_rng(7)

# greedy rows: the argmax chain, token for token with the reference; a placeholder is never accepted
k = np.array([3, 1, 0, 2])
logits = rng.normal(size=(int(k.sum()) + 4, 16)).astype(np.float32)
drafts = np.array([int(np.argmax(logits[0])), int(np.argmax(logits[1])), 5, 2, -1, 4])
greedy = VerifyBatch(k, drafts, None, logits, np.zeros(4), np.zeros(4, np.int64), np.ones(4),
                     np.arange(4, dtype=np.uint64), np.arange(4))
got, want = device.verify(greedy), reference_step(greedy, None)
assert got.output_token_ids.tolist() == want.output_token_ids.tolist(), (got, want)

# min_tokens at every row, the bonus row included (SPEC 12.2): output [2], min_tokens 2, stop token 3 the
# argmax of every row, drafts [1, 3]: row 0 (1 emitted) bans 3, rows 1 and 2 (2 and 3) allow it -> [1, 3, 3]
z = np.zeros((3, 4), np.float32)
z[:, 3] = 5.0
z[0, 1] = 1.0
step = VerifyBatch(np.array([2]), np.array([1, 3]), None, z, np.zeros(1), np.zeros(1, np.int64), np.ones(1),
                   np.array([1], np.uint64), np.array([0]),
                   SamplerParams(output_token_ids=(np.array([2]),), min_tokens=np.array([2]),
                                 stop_token_ids=(np.array([3]),)))
got, want = device.verify(step), reference_step(step, None)
assert got.output_token_ids.tolist() == want.output_token_ids.tolist() == [[1, 3, 3]], (got, want)

# the same call twice: the same tokens (randomness keyed by seed and position, no generator state)
sampled = VerifyBatch(k, np.array([1, 2, 3, 4, 5, 6]), rng.dirichlet(np.ones(16), 6).astype(np.float32), logits,
                      np.full(4, 0.8), np.zeros(4, np.int64), np.ones(4), np.arange(4, dtype=np.uint64), np.arange(4))
first, second = device.verify(sampled), device.verify(sampled)
assert first.output_token_ids.tolist() == second.output_token_ids.tolist()
# ... and each request alone gives its tokens in the batch (its draft rows found at its own slot)
from specsim.testing.batches import select_requests
for i in range(4):
    alone = device.verify(select_requests(sampled, [i])[0])
    n = int(first.num_accepted[i]) + 1
    assert alone.output_token_ids[0, :n].tolist() == first.output_token_ids[i, :n].tolist(), i
assert ((first.output_token_ids >= -1) & (first.output_token_ids < 16)).all()
print("ok")
"""


@pytest.mark.needs_extra("triton")   # vLLM's kernels run in Triton's interpreter
def test_v2s_verifier_matches_the_reference_where_it_is_deterministic(cache):
    """A process of its own (the interpreter is a per-process Triton mode)."""
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", GLUE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout[-2000:] + out.stderr[-3000:]


def test_every_shipped_v2_waiver_has_a_reason_link_deviation_and_judgement():
    for w in load(str(WAIVERS)):
        assert w.reason and w.issue.startswith("https://github.com/vllm-project/vllm/blob/v0.33.0/"), w.source
        assert w.deviation and w.judgement in JUDGEMENTS, w.source
        assert set(w.devices) == {"vllm-v2", "vllm-v2-interpret"}, w.source


@pytest.mark.needs_extra("triton")   # vLLM's kernels run in Triton's interpreter
def test_every_kernel_v2_launches_compiles_for_sm90_without_a_gpu(cache):
    """``tools/vllm_v2_ptx.py`` in a process of its own (compiled mode): the kernels as the device launches them,
    the stand-ins included (a plain-Python watermark stand-in fails here: Triton refuses non-JIT callees)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-W", "ignore", str(ROOT / "tools" / "vllm_v2_ptx.py")], capture_output=True,
                         text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    compiled = out.stdout.strip().splitlines()[-1]
    for kernel in ("_rejection_kernel", "_resample_kernel", "_insert_resampled_kernel", "_bias_kernel",
                   "_penalties_kernel", "_bad_words_kernel", "_topk_topp_kernel", "_gumbel_sample_kernel"):
        assert kernel in compiled, compiled
