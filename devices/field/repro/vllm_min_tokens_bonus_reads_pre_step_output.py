"""vLLM 0.33.0 (V1 model runner): with speculative decoding, ``min_tokens`` keeps the stop tokens banned at
the *bonus* position by the output length before the step, although the accepted drafts already carried the
output to ``min_tokens``. A request that should stop at that position cannot: its stop comes one step late
(or never, if the model moves on).

At the drafts' rows, ``RejectionSampler.apply_logits_processors`` calls
``MinTokensLogitsProcessor.apply_with_spec_decode``, which counts the drafts: draft row j is masked only
while ``len(output) + j < min_tokens``. The bonus row goes through
``Sampler.apply_logits_processors(..., predict_bonus_token=True)``, which combines the output with the
drafts for penalties and bad words but calls the processor's plain ``apply``: it masks the stop tokens of
every request the processor still tracks, i.e. while ``len(output) < min_tokens`` -- the output as it was
before the step. Without speculation the same position (output length ``len(output) + K``) may stop.

The case: ``min_tokens=3``, stop token 3, output so far ``[2]`` (length 1), drafts ``[1, 1]`` (no stop
token among them), greedy, every row's logits ``[0, 5, 0, 10]`` (V = 4). Row 0 (length 1) and row 1
(length 2) must ban 3, so both drafts are the argmax and are accepted; the bonus position has length 3 =
min_tokens, so 3 is allowed there and is the argmax: the lossless answer is ``[1, 1, 3]`` (the request
stops). Every token comes from vLLM's own code: both ``apply_logits_processors`` and ``rejection_sample``
(the bonus token is the argmax of vLLM's processed bonus row, as ``Sampler.greedy_sample`` takes it).

Run (``pip install vllm==0.33.0``; a CUDA GPU, or Triton's interpreter with ``TRITON_INTERPRET=1``)::

    python vllm_min_tokens_bonus_reads_pre_step_output.py

Exit status: 0 the output is the lossless ``[1, 1, 3]``; 1 the bug is present (vLLM 0.33.0 emits
``[1, 1, 1]``: the stop is delayed); 3 a dependency (vllm, torch) is missing.
"""

from __future__ import annotations

import sys
import types

MISSING_DEPENDENCY = 3
EXPECTED = [1, 1, 3]


def main() -> int:
    try:
        import torch
        import vllm
        from vllm.v1.sample import rejection_sampler as rs
        from vllm.v1.sample.logits_processor import LogitsProcessors
        from vllm.v1.sample.logits_processor.builtin import MinTokensLogitsProcessor as MinTokens
        from vllm.v1.sample.logits_processor.interface import BatchUpdate
        from vllm.v1.sample.metadata import SamplingMetadata
        from vllm.v1.sample.sampler import Sampler
    except ImportError as e:
        print(f"missing dependency: {e}")
        return MISSING_DEPENDENCY
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"vllm {vllm.__version__}, torch {torch.__version__}, device {device}")
    # SamplingParams(min_tokens=3, stop_token_ids=[3]) as the processor reads it (add_request).
    request = types.SimpleNamespace(min_tokens=3, all_stop_token_ids={3}, structured_outputs=None)
    output, drafts = [2], [1, 1]
    min_tokens = MinTokens(None, torch.device(device), False)
    min_tokens.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, request, [], output)], moved=[]))
    zeros = torch.zeros(1, dtype=torch.float32, device=device)
    metadata = SamplingMetadata(
        temperature=None, all_greedy=True, all_random=False, top_p=None, top_k=None, generators={},
        max_num_logprobs=None, no_penalties=True, prompt_token_ids=None, frequency_penalties=zeros,
        presence_penalties=zeros, repetition_penalties=zeros + 1, output_token_ids=[output],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors([min_tokens]),
        spec_token_ids=[drafts])
    spec = types.SimpleNamespace(num_draft_tokens=[len(drafts)])
    row = [0.0, 5.0, 0.0, 10.0]
    # The drafts' rows: RejectionSampler.apply_logits_processors (it reads no attribute of self).
    target_rows = rs.RejectionSampler.apply_logits_processors(None, torch.tensor([row, row], device=device),
                                                              metadata, spec)
    # The bonus row: Sampler.apply_logits_processors (static helpers only: called on the class); its greedy
    # token is the argmax (Sampler.greedy_sample's custom op computes the same on a GPU build).
    bonus_row = Sampler.apply_logits_processors(Sampler, torch.tensor([row], device=device), metadata, True)
    bonus = bonus_row.argmax(dim=-1).view(-1, 1).to(torch.int32)
    out = rs.rejection_sample(torch.tensor(drafts, dtype=torch.int32, device=device), [len(drafts)], len(drafts),
                              torch.tensor([len(drafts)], dtype=torch.int32, device=device), None, target_rows,
                              bonus, metadata)
    emitted = [int(t) for t in out[0].tolist() if t != -1]
    print("min_tokens=3, stop token 3, output so far [2], drafts [1, 1], greedy, logits [0, 5, 0, 10] per row")
    for name, value in (("draft row 0 (output length 1)", target_rows[0, 3]),
                        ("draft row 1 (output length 2)", target_rows[1, 3]),
                        ("bonus row (output length 3)", bonus_row[0, 3])):
        print(f"  {name}: stop token logit {float(value)}")
    print(f"expected: {EXPECTED} (both drafts accepted, then the stop token at length 3 = min_tokens)")
    print(f"got:      {emitted}")
    if emitted != EXPECTED:
        print("BUG: the bonus row bans the stop token by the pre-step output length (1 < 3), though the accepted "
              "drafts made it 3: the request does not stop where it would without speculation")
        return 1
    print("ok: the bonus position may stop")
    return 0


if __name__ == "__main__":
    sys.exit(main())
