"""transformers 5.23.0: in assisted generation with ``do_sample=True``, the assistant's draft law applies the
request's temperature, top-k and top-p **twice**.

``GenerationMixin._assisted_decoding`` hands the candidate generator the target's
prepared ``logits_processor`` (which already holds ``TemperatureLogitsWarper``,
``TopKLogitsWarper``, ``TopPLogitsWarper``) together with the request's
``generation_config``. ``AssistedCandidateGenerator`` passes both to
``assistant_model.generate``, whose ``_get_logits_processor`` merges the given
list into its *non-warper* defaults (no type in common, so nothing is
replaced) and then appends its own warpers from the same ``generation_config``.
The assistant's scores are therefore ``W(W(z))``: temperature T acts as T²,
top-p cuts the already-cut row again. The drafts are sampled from those scores
and the same scores are returned as ``candidate_logits``, so the verifier's q
is the law the drafts came from: **the output law is still the target's**
(lossless); what changes is the draft law, hence the acceptance rate.

Run (``pip install transformers==5.23.0 torch``; CPU, tiny random-weight
Llamas, no download)::

    python transformers_assistant_warpers_twice.py

It prints, for T = 0.7 and for T = 1.1 with top-p 0.8, the assistant's first
candidate row q, the row with the warpers applied once and twice, and the
expected acceptance ``1 - TV(target row, q)`` of the first draft with each.
transformers 5.23.0 prints ``q == warpers twice``; the fix (warpers once)
prints ``q == warpers once``.
"""

from __future__ import annotations

import sys

try:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.generation import candidate_generator, logits_process as lp
except ImportError as missing:   # exit 3, never 1: a missing dependency is not the bug
    print(f"missing dependency: {missing}")
    sys.exit(3)

VOCAB_SIZE, PROMPT = 8, [1, 4, 5, 4]    # no 0: id 0 is the models' pad id, which generate masks out


def tiny_llama(seed: int):
    config = LlamaConfig(vocab_size=VOCAB_SIZE, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         initializer_range=0.3, pad_token_id=0, bos_token_id=None, eos_token_id=None)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def warpers(temperature: float, top_k: int, top_p: float):
    chain = lp.LogitsProcessorList()
    if temperature != 1.0:
        chain.append(lp.TemperatureLogitsWarper(temperature))
    if top_k:
        chain.append(lp.TopKLogitsWarper(top_k))
    if top_p < 1.0:
        chain.append(lp.TopPLogitsWarper(top_p))
    return chain


class Captured(Exception):
    pass


def first_candidate_row(target, assistant, **sampling) -> torch.Tensor:
    """q of the first draft, as AssistedCandidateGenerator hands it to the verifier."""
    cls = candidate_generator.AssistedCandidateGenerator
    original = cls.get_candidates

    def capture(self, input_ids, **kw):
        raise Captured(original(self, input_ids, **kw)[1])

    cls.get_candidates = capture
    try:
        target.generate(torch.tensor([PROMPT]), assistant_model=assistant, max_new_tokens=4, do_sample=True,
                        pad_token_id=0, eos_token_id=None, **sampling)
    except Captured as got:
        return torch.softmax(got.args[0][0, 0].double(), -1)
    finally:
        cls.get_candidates = original
    raise RuntimeError("generate never asked for candidates")


def main() -> int:
    from transformers.utils import logging
    logging.set_verbosity_error()
    target, assistant = tiny_llama(1), tiny_llama(2)
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    twice_everywhere = True
    with torch.no_grad():
        z_draft = assistant(torch.tensor([PROMPT])).logits[0, -1].float()
        z_target = target(torch.tensor([PROMPT])).logits[0, -1].float()
        for sampling in (dict(temperature=0.7, top_k=0, top_p=1.0), dict(temperature=1.1, top_k=0, top_p=0.8)):
            w = warpers(**sampling)
            q = first_candidate_row(target, assistant, **sampling)
            once = torch.softmax(w(None, z_draft[None])[0].double(), -1)
            twice = torch.softmax(w(None, w(None, z_draft[None]))[0].double(), -1)
            target_row = torch.softmax(w(None, z_target[None])[0].double(), -1)
            accept = {name: 1 - 0.5 * float((target_row - row).abs().sum()) for name, row in
                      (("q", q), ("once", once), ("twice", twice))}
            same = "twice" if torch.allclose(q, twice, atol=1e-6) else "once" if torch.allclose(q, once, atol=1e-6) \
                else "neither"
            twice_everywhere &= same == "twice"
            print(f"{sampling}: q == warpers {same}")
            print(f"  q     {[round(x, 4) for x in q.tolist()]}")
            print(f"  once  {[round(x, 4) for x in once.tolist()]}")
            print(f"  twice {[round(x, 4) for x in twice.tolist()]}")
            print(f"  first-draft acceptance 1 - TV(target row, .): q {accept['q']:.4f}, once {accept['once']:.4f}, "
                  f"twice {accept['twice']:.4f}")
    return 1 if twice_everywhere else 0


if __name__ == "__main__":
    raise SystemExit(main())
