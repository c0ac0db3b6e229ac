"""transformers 5.23.0: speculative sampling with a Gemma 4 assistant (``do_sample=True``) is not lossless.

``GenerationMixin._get_candidate_generator`` picks
``SinglePositionMultiTokenCandidateGenerator`` for a ``Gemma4Assistant*``
assistant. Its ``get_candidates`` drafts every token by
``outputs.logits.argmax(dim=-1)``, whatever ``do_sample`` says, and returns
the raw ``outputs.logits`` as ``candidate_logits``; ``_assisted_decoding``
hands them to ``_speculative_sampling``, which takes their softmax as q, the
law the drafts were drawn from. They were not drawn from it: the draft x is
the argmax of q, every time. ``_speculative_sampling`` accepts x with
probability ``min(1, p(x) / q(x))`` and otherwise samples ``max(p - q, 0)``,
so the emitted token follows ``a·[y = x] + (1 - a)·max(p - q, 0)(y) / Z``
with ``a = min(1, p(x) / q(x))``, not the target's p.

Run (``pip install transformers==5.23.0 torch``; CPU, tiny random-weight Gemma 4
target and assistant built from configs, no download)::

    python transformers_gemma4_assistant_argmax_drafts.py [--seeds N]

It builds a ``Gemma4ForCausalLM`` target (4 layers, the last two sharing the
first two's keys and values, V = 8) and a ``Gemma4AssistantForCausalLM``
assistant, and calls ``target.generate(..., assistant_model=assistant,
do_sample=True)`` with one draft a round over N seeds (default 300), the first target
token pinned by a logits processor so that every run drafts from the same
context. It prints (1) the first draft of every run against the returned q
(every draft is q's argmax), and (2) the law of the first token the round
emits: the target's p (what lossless speculative sampling gives), the law
``_speculative_sampling``'s rule gives with an argmax draft (computed
exactly), and the frequencies ``generate`` produced. The assistant has no
decoder layer: 5.23.0 constructs no ``Gemma4AssistantForCausalLM`` with one
(``Gemma4AssistantConfig`` makes every layer KV-shared, and
``Gemma4TextConfig.kv_sharing_modes`` then raises); the layers would change the
logits' values, not how the generator turns logits into drafts and q.

Exit status: 0 the emitted law is the target's (lossless), 1 it is not (the bug), 3 a dependency is missing.
"""

from __future__ import annotations

import sys

try:
    import torch
    import transformers
    from transformers import (Gemma4AssistantConfig, Gemma4AssistantForCausalLM, Gemma4ForCausalLM,
                              Gemma4TextConfig, LogitsProcessor, LogitsProcessorList)
    from transformers.generation import candidate_generator
    from transformers.utils import logging
except ImportError as missing:   # exit 3, never 1: a missing dependency is not the bug
    print(f"missing dependency: {missing}")
    sys.exit(3)

VOCAB_SIZE, HIDDEN = 8, 16
PROMPT, FIRST = [3, 5, 1], 6          # the context the assistant drafts from: PROMPT + [FIRST]
TV_NOISE = 0.15        # TV of 200 or more draws of an 8-token law from the law itself: about 0.06, rarely 0.1


def text_config(**overrides):
    fields = dict(vocab_size=VOCAB_SIZE, hidden_size=HIDDEN, intermediate_size=32, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=8, global_head_dim=8, hidden_size_per_layer_input=0,
                  sliding_window=4, max_position_embeddings=64, initializer_range=0.3,
                  pad_token_id=0, bos_token_id=2, eos_token_id=1)
    fields.update(overrides)
    return Gemma4TextConfig(**fields)


def models():
    target_config = text_config(num_hidden_layers=4, num_kv_shared_layers=2, vocab_size_per_layer_input=VOCAB_SIZE,
                                layer_types=["sliding_attention", "full_attention"] * 2)
    assistant_config = Gemma4AssistantConfig(
        text_config=text_config(num_hidden_layers=0, layer_types=[], vocab_size_per_layer_input=0),
        backbone_hidden_size=HIDDEN)
    torch.manual_seed(1)
    target = Gemma4ForCausalLM(target_config).eval()
    torch.manual_seed(2)
    assistant = Gemma4AssistantForCausalLM(assistant_config).eval()
    assistant.generation_config.num_assistant_tokens = 1
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    return target, assistant


class PinFirstToken(LogitsProcessor):
    """The target's first token is FIRST, so that every run drafts from PROMPT + [FIRST]."""

    def __call__(self, input_ids, scores):
        if input_ids.shape[1] != len(PROMPT):
            return scores
        pinned = torch.full_like(scores, -float("inf"))
        pinned[:, FIRST] = 0.0
        return pinned


def run(target, assistant, seed: int):
    """One generate call: (its first draft, the q it was handed with, the first token the round emitted)."""
    seen = {}
    cls = candidate_generator.SinglePositionMultiTokenCandidateGenerator
    original = cls.get_candidates

    def recording(self, input_ids, **kwargs):
        ids, logits = original(self, input_ids, **kwargs)
        if logits is not None and "draft" not in seen:
            seen["draft"] = int(ids[0, input_ids.shape[1]])
            seen["q"] = logits[0, 0].double().softmax(-1)
        return ids, logits

    cls.get_candidates = recording
    try:
        torch.manual_seed(seed)
        prompt = torch.tensor([PROMPT])
        out = target.generate(prompt, attention_mask=torch.ones_like(prompt), assistant_model=assistant,
                              do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=3,
                              logits_processor=LogitsProcessorList([PinFirstToken()]),
                              pad_token_id=0, eos_token_id=None)
    finally:
        cls.get_candidates = original
    return seen["draft"], seen["q"], int(out[0, len(PROMPT) + 1])


def fmt(row) -> str:
    return "[" + ", ".join(f"{float(v):.3f}" for v in row) + "]"


def main(argv: list[str]) -> int:
    seeds = int(argv[argv.index("--seeds") + 1]) if "--seeds" in argv else 300
    logging.set_verbosity_error()     # the configs' notice about per-layer-type rope parameters
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    target, assistant = models()
    with torch.no_grad():
        # every position through every layer, as generate runs the target here (its outputs carry hidden states)
        p = target(torch.tensor([PROMPT + [FIRST]]), output_hidden_states=True).logits[0, -1].double().softmax(-1)
        drafts, counts, q = [], torch.zeros(VOCAB_SIZE, dtype=torch.float64), None
        for seed in range(seeds):
            draft, q, emitted = run(target, assistant, seed)
            drafts.append(draft)
            counts[emitted] += 1
    x = int(q.argmax())
    print(f"context {PROMPT + [FIRST]}: the assistant's q = softmax(candidate_logits) = {fmt(q)}")
    print(f"(1) first draft of {seeds} runs with do_sample=True: {sorted(set(drafts))} "
          f"({drafts.count(x)} of {seeds} are argmax q = {x}); drawn from q, token {x} would be drafted "
          f"{float(q[x]):.3f} of the time")
    accept = min(1.0, float(p[x] / q[x]))
    residual = (p - q).clamp(min=0)
    transformers_law = (1 - accept) * residual / residual.sum()
    transformers_law[x] += accept
    freq = counts / seeds
    tv_rule, tv_seen = 0.5 * float((transformers_law - p).abs().sum()), 0.5 * float((freq - p).abs().sum())
    print("(2) the first token the round emits:")
    print(f"    target p (lossless)                 {fmt(p)}")
    print(f"    _speculative_sampling, argmax draft {fmt(transformers_law)}  TV from p {tv_rule:.3f}")
    print(f"    generate, {seeds} seeds".ljust(40) + f"{fmt(freq)}  TV from p {tv_seen:.3f}")
    if tv_seen > TV_NOISE and all(d == x for d in drafts):
        print("NOT lossless: the drafts are q's argmax, not draws from q, and the emitted law is not the target's")
        return 1
    print("lossless: the emitted law is the target's within sampling noise")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
