"""vLLM 0.33.0: with speculative decoding, ``min_tokens`` bans the stop tokens at the *bonus* row by the
output length before the step, although every draft before that row was accepted: a step whose drafts
carry the output past ``min_tokens`` can never end with a stop token at its bonus position.

At the verified rows, ``RejectionSampler.apply_logits_processors`` calls
``MinTokensLogitsProcessor.apply_with_spec_decode``, which counts the drafts: draft row j is masked
only while ``len(output) + j < min_tokens`` (vLLM PR #32642). The bonus row goes through
``Sampler.apply_logits_processors(..., predict_bonus_token=True)``, which combines the output with the
drafts for penalties and bad words (PR #19482) but calls the processor's plain ``apply``: it masks the
stop tokens of every request the processor still tracks, i.e. while ``len(output) < min_tokens`` —
the output as it was before the step. A non-speculative sampler at that position (output length
``len(output) + K``) would allow them, so the bonus token's law differs from vLLM's own
non-speculative law there (SPEC §12.2: every row reads the output so far, drafts included).
Fix: in ``Sampler.apply_logits_processors`` with ``predict_bonus_token``, mask only requests with
``len(output) + len(spec_token_ids[i]) < min_tokens`` (e.g. an ``apply_to_bonus(num_draft_tokens)``
beside ``apply_with_spec_decode``).

The case: min_tokens 2, stop token 3, output so far [2] (length 1), drafts [1, 3]; rows 0, 1 are the
drafts' rows (output lengths 1, 2), the bonus row sees [2, 1, 3] (length 3). Expected stop-token
logits: row 0 -inf (length 1 < 2), row 1 and the bonus row 0 (lengths 2, 3 ≥ 2).

Run (a CUDA GPU and ``pip install vllm==0.33.0``; nothing else)::

    python vllm_min_tokens_bonus_reads_pre_step_output.py

Expected: the bonus row's stop-token logit 0.0 (exit 0). vLLM 0.33.0 prints ``bonus row (output
length 3): stop token logit -inf`` and exits 1.
"""

from __future__ import annotations

import sys
import types

import torch


def main() -> int:
    import vllm
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.logits_processor.builtin import MinTokensLogitsProcessor as MinTokens
    from vllm.v1.sample.logits_processor.interface import BatchUpdate
    from vllm.v1.sample.metadata import SamplingMetadata
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"vllm {vllm.__version__}, device {device}")
    # The request's SamplingParams(min_tokens=2, stop_token_ids=[3]) as the processor reads it (add_request).
    request = types.SimpleNamespace(min_tokens=2, all_stop_token_ids={3}, structured_outputs=None)
    output, drafts = [2], [1, 3]
    min_tokens = MinTokens(None, torch.device(device), False)
    min_tokens.update_state(BatchUpdate(batch_size=1, removed=[], added=[(0, request, [], output)], moved=[]))
    zeros = torch.zeros(1, dtype=torch.float32, device=device)
    metadata = SamplingMetadata(
        temperature=torch.ones(1, dtype=torch.float32, device=device), all_greedy=False, all_random=True,
        top_p=None, top_k=None, generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=zeros, presence_penalties=zeros, repetition_penalties=zeros + 1,
        output_token_ids=[output], allowed_token_ids_mask=None, bad_words_token_ids={},
        logitsprocs=LogitsProcessors([min_tokens]), spec_token_ids=[drafts])
    spec = types.SimpleNamespace(num_draft_tokens=[len(drafts)])
    # The drafts' rows: vLLM's RejectionSampler.apply_logits_processors (only self.* it reads: none).
    rows = RejectionSampler.apply_logits_processors(None, torch.zeros(2, 4, device=device), metadata, spec)
    # The bonus row: vLLM's Sampler.apply_logits_processors (static helpers only: called on the class).
    bonus = Sampler.apply_logits_processors(Sampler, torch.zeros(1, 4, device=device), metadata, True)
    for name, value, want in (("draft row 0 (output length 1)", rows[0, 3], "-inf"),
                              ("draft row 1 (output length 2)", rows[1, 3], "0.0"),
                              ("bonus row (output length 3)", bonus[0, 3], "0.0")):
        print(f"{name}: stop token logit {float(value)} (expected {want})")
    if float(bonus[0, 3]) == float("-inf"):
        print("BUG: the bonus row bans the stop token by the pre-step output length (1 < min_tokens 2), "
              "though the accepted drafts made it 3")
        return 1
    print("ok: the bonus row reads the output so far")
    return 0


if __name__ == "__main__":
    sys.exit(main())
