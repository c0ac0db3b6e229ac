"""vLLM 0.33.0's V1 probabilistic draft sampler without vLLM, and whether it honours a request's seed.

With ``speculative_config.draft_sample_method = "probabilistic"`` the V1 runner's
drafters (``vllm/v1/spec_decode/llm_base_proposer.py``) draw every draft token
with ``compute_probs_and_sample_next_token(logits, sampling_metadata)``: softmax
at the request's temperature, then an exponential race whose noise comes from
``q.exponential_()`` under ``# TODO(woosuk): Consider seeds.``, i.e. from
torch's global generator, while the target's sampler and the rejection sampler
draw a seeded request's randomness from its own ``sampling_metadata.generators``.

``load_draft_sampler`` takes that one function out of the pinned wheel member
(``vllm_loader.PROPOSER_PINNED``: sha256 checked against the pin and the wheel's
``RECORD``; the rest of the file is the drafter's model machinery, which never
runs here) and executes it with the names it uses bound to the V1 sampler's
pinned members (``topk_topp_sampler``'s ``empty_exponential_noise_like`` and
``sample_with_exponential_noise``, ``sampler._SAMPLING_EPS``).
``seeded_drafts`` runs it as the drafter does for one seeded request, and
``seed_honoured`` answers the question: the same request, the same seed, the
same logits, two different global generator states — the same drafts iff the
seed is honoured.

No vLLM code is in this repository.
"""

from __future__ import annotations

import types

import numpy as np

FUNCTION = "compute_probs_and_sample_next_token"
BOUND = {"empty_exponential_noise_like": "topk_topp_sampler", "sample_with_exponential_noise": "topk_topp_sampler",
         "_SAMPLING_EPS": "sampler"}
"""The vLLM names the function reads, and the pinned V1 member (``VllmSampler`` field) each comes from."""


def draft_sampler_from_source(source: bytes, filename: str, v1) -> types.FunctionType:
    """``compute_probs_and_sample_next_token`` out of ``source`` (the text of ``llm_base_proposer.py``), its vLLM
    names bound from ``v1`` (a loaded ``VllmSampler``); ``VllmLoadError`` if it reads a name not bound here."""
    from devices.field.vllm_loader import VllmLoadError, _part
    module = types.ModuleType("vllm.v1.spec_decode.llm_base_proposer")
    module.__file__ = filename
    for name, member in BOUND.items():
        module.__dict__[name] = getattr(getattr(v1, member), name)
    module.__dict__["SamplingMetadata"] = v1.sample_metadata.SamplingMetadata
    exec(_part(filename, source, (FUNCTION,)), module.__dict__)
    function = module.__dict__[FUNCTION]
    import builtins
    unbound = [n for n in function.__code__.co_names
               if n not in module.__dict__ and not hasattr(builtins, n) and not _attribute_only(function, n)]
    if unbound:
        raise VllmLoadError(f"{filename}: {FUNCTION} reads {unbound}, which devices.field.vllm_drafter does not bind")
    return function


def _attribute_only(function, name: str) -> bool:
    """Whether ``name`` is read only as an attribute (``x.name``), never as a global, in ``function``."""
    import dis
    return all(i.opname not in ("LOAD_GLOBAL", "LOAD_NAME") or i.argval != name
               for i in dis.get_instructions(function))


def load_draft_sampler(interpret: bool | None = None):
    """``(compute_probs_and_sample_next_token, SamplingMetadata)`` of vLLM 0.33.0, from the pinned members
    (``VllmLoadError`` with what to do when the proposer member cannot be fetched or does not match its pin)."""
    from devices.field import vllm_loader
    cache = vllm_loader.fetch(spec=vllm_loader.VLLM_PROPOSER_WHEEL)
    member = vllm_loader.PROPOSER_MEMBER
    data = (cache / member).read_bytes()
    record = vllm_loader._record_hashes((cache / vllm_loader.RECORD).read_bytes())
    vllm_loader._verify(member, data, record, vllm_loader.VLLM_PROPOSER_WHEEL)
    v1 = vllm_loader.load_rejection_sampler(interpret=interpret)
    return draft_sampler_from_source(data, str(cache / member), v1), v1.sample_metadata.SamplingMetadata


def sampling_metadata(metadata_cls, temperature: float, seed: int | None):
    """The V1 runner's ``SamplingMetadata`` for one random request, with its own ``torch.Generator`` seeded
    ``seed`` (as the runner builds it for ``SamplingParams(seed=seed)``), or none for ``seed=None``."""
    import torch
    generators = {} if seed is None else {0: torch.Generator().manual_seed(seed)}
    empty = torch.empty(0)
    return metadata_cls(temperature=torch.tensor([temperature], dtype=torch.float32), all_greedy=False,
                        all_random=True, top_p=None, top_k=None, generators=generators, max_num_logprobs=None,
                        no_penalties=True, prompt_token_ids=None, frequency_penalties=empty,
                        presence_penalties=empty, repetition_penalties=empty, output_token_ids=[[]],
                        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=None)


def seeded_drafts(sample, metadata_cls, draft_logits, *, seed: int, global_seed: int) -> np.ndarray:
    """``[steps]`` drafts of one request seeded ``seed``, one per row of ``draft_logits`` ``[steps, V]``, drawn
    as the drafter draws them (a fresh metadata per run, the global generator set to ``global_seed`` first)."""
    import torch
    logits = torch.as_tensor(np.asarray(draft_logits, np.float32))
    if logits.ndim != 2:
        raise ValueError(f"draft_logits: [steps, V], got shape {tuple(logits.shape)}")
    torch.manual_seed(global_seed)
    metadata = sampling_metadata(metadata_cls, 1.0, seed)
    out = []
    for row in logits:
        token_ids, _ = sample(row.view(1, -1).clone(), metadata)
        out.append(int(token_ids[0]))
    return np.asarray(out, np.int64)


def seed_honoured(sample, metadata_cls, *, steps: int = 64, vocab: int = 8, seed: int = 1234) -> dict:
    """The same seeded request drafted twice, after ``torch.manual_seed(0)`` and ``torch.manual_seed(1)``:
    ``{"honoured": drafts equal, "drafts": (first, second), "differing_steps": n}``. Uniform rows (every
    token equally likely) make any difference in the noise visible."""
    rows = np.zeros((steps, vocab), np.float32)
    first = seeded_drafts(sample, metadata_cls, rows, seed=seed, global_seed=0)
    second = seeded_drafts(sample, metadata_cls, rows, seed=seed, global_seed=1)
    return {"honoured": bool((first == second).all()), "drafts": (first.tolist(), second.tolist()),
            "differing_steps": int((first != second).sum())}
