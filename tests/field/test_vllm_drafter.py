"""vLLM 0.33.0's V1 probabilistic draft sampler (``devices.field.vllm_drafter``): its member pinned as the wheel's
RECORD lists it, the seed experiment on stand-in samplers of this file, and on vLLM's own function from the pinned
member — drafts that change with the global generator although the request is seeded."""

from __future__ import annotations

import base64
import subprocess
import sys
import types

import pytest

from devices.field import vllm_drafter, vllm_loader
from devices.field.wheels import cached


def test_the_drafter_member_is_pinned_as_the_wheels_record_lists_it_and_kept_apart_from_the_samplers():
    assert vllm_loader.PROPOSER_MEMBER not in vllm_loader.VLLM_WHEEL.pins   # an older cache still loads both samplers
    assert vllm_loader.VLLM_PROPOSER_WHEEL.pins[vllm_loader.RECORD] == vllm_loader.PINNED[vllm_loader.RECORD]
    record = cached(vllm_loader.VLLM_WHEEL, vllm_loader.cache_dir(), vllm_loader.RECORD)
    if record is None:
        pytest.skip("vLLM's RECORD is not in the cache here (python -m devices.field.vllm_loader fetch)")
    line = next(r for r in record.decode().splitlines() if r.startswith(vllm_loader.PROPOSER_MEMBER + ","))
    digest = line.split(",")[1].removeprefix("sha256=")
    assert base64.urlsafe_b64decode(digest + "=").hex() == vllm_loader.PROPOSER_PINNED[vllm_loader.PROPOSER_MEMBER]


class _Metadata:
    """The fields the seed experiment fills, for the stand-in samplers below."""

    def __init__(self, **fields):
        self.__dict__.update(fields)


def _global_noise_sampler(logits, metadata):
    import torch
    q = torch.empty_like(logits).exponential_()
    return logits.softmax(-1).div(q).argmax(-1), None


def _seeded_noise_sampler(logits, metadata):
    import torch
    q = torch.empty_like(logits).exponential_(generator=metadata.generators[0])
    return logits.softmax(-1).div(q).argmax(-1), None


def test_the_experiment_tells_a_sampler_that_honours_the_seed_from_one_that_does_not():
    pytest.importorskip("torch")
    assert not vllm_drafter.seed_honoured(_global_noise_sampler, _Metadata)["honoured"]
    assert vllm_drafter.seed_honoured(_seeded_noise_sampler, _Metadata)["honoured"]


def test_bad_input_names_the_argument():
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match="draft_logits"):
        vllm_drafter.seeded_drafts(_seeded_noise_sampler, _Metadata, [0.0, 0.0], seed=1, global_seed=0)


def test_a_name_the_loader_does_not_bind_is_refused_by_name():
    source = b"def compute_probs_and_sample_next_token(logits, metadata):\n    return unknown_helper(logits)\n"
    v1 = types.SimpleNamespace(topk_topp_sampler=types.SimpleNamespace(empty_exponential_noise_like=None,
                                                                     sample_with_exponential_noise=None),
                               sampler=types.SimpleNamespace(_SAMPLING_EPS=1e-5),
                               sample_metadata=types.SimpleNamespace(SamplingMetadata=_Metadata))
    with pytest.raises(vllm_loader.VllmLoadError, match="unknown_helper"):
        vllm_drafter.draft_sampler_from_source(source, "proposer.py", v1)


GLUE = """
import sys
from devices.field import vllm_drafter, vllm_loader
try:
    sample, metadata_cls = vllm_drafter.load_draft_sampler(interpret=True)
except vllm_loader.VllmLoadError as e:
    print("unavailable:", e)
    sys.exit(3)
result = vllm_drafter.seed_honoured(sample, metadata_cls)
print(result["honoured"], result["differing_steps"])
"""


@pytest.mark.needs_extra("triton")   # the V1 sampler's members (its helpers) load with Triton
def test_vllms_probabilistic_drafts_ignore_the_request_seed(cache):
    """A process of its own (the interpreter is a per-process Triton mode)."""
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", GLUE], capture_output=True, text=True, timeout=300)
    if out.returncode == 3:
        pytest.skip(f"vLLM's drafter member {out.stdout.strip()}")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    honoured, differing = out.stdout.split()[-2:]
    assert honoured == "False" and int(differing) > 32, out.stdout


REPORT = (__import__("pathlib").Path(__file__).resolve().parents[2] / "docs" / "field-results"
          / "upstream-vllm-probabilistic-drafts-ignore-request-seed.md")
QUOTED = {"vllm/v1/spec_decode/llm_base_proposer.py": {1853: "TODO(woosuk): Consider seeds", 1855: "q.exponential_()",
                                                       1824: "def compute_probs_and_sample_next_token",
                                                       473: "compute_probs_and_sample_next_token("},
          "vllm/v1/sample/ops/topk_topp_sampler.py": {627: "q[i].exponential_(generator=generator)"}}


def test_the_upstream_report_stands_alone_and_its_lines_say_what_it_quotes():
    from specsim.field.upstream import Entry, blob_paths, upstream_text_problems
    text = REPORT.read_text()
    entry = Entry(deviation="probabilistic-drafts-ignore-request-seed", devices=(), package="vllm",
                  repository="https://github.com/vllm-project/vllm", version="0.33.0", tag="v{version}",
                  runner="V1 model runner", title="", what="", expected="", impact="",
                  repro="vllm_probabilistic_drafts_ignore_request_seed.py")
    assert upstream_text_problems(text, entry) == []
    assert set(blob_paths(text)) == set(QUOTED)
    for member, lines in QUOTED.items():
        spec = vllm_loader.VLLM_PROPOSER_WHEEL if member == vllm_loader.PROPOSER_MEMBER else vllm_loader.VLLM_WHEEL
        data = cached(spec, vllm_loader.cache_dir(), member)
        if data is None:
            pytest.skip(f"{member} is not in the cache here (python -m devices.field.vllm_loader fetch)")
        source = data.decode().splitlines()
        for number, needle in lines.items():
            assert needle in source[number - 1], (member, number, source[number - 1])
