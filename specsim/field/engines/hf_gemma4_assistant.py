"""HF transformers' Gemma-4 assistant drafter as a proposer (``specsim proposer transformers-gemma4-assistant``).

What runs is ``transformers.generation.candidate_generator.SinglePositionMultiTokenCandidateGenerator``
of the pinned release (``devices.field.hf_transformers.PINNED_VERSION``), as
``GenerationMixin._get_candidate_generator`` picks it for a ``Gemma4Assistant*``
assistant: ``target.generate(prompt, assistant_model=assistant, ...)`` builds it
and runs it, with the request's ``do_sample``, ``temperature``, ``top_k`` and
``top_p``, and is stopped at the first ``get_candidates`` call that returns
drafts. The drafts are the candidate ids after the context, ``draft_probs``
the softmax (float64) of the ``candidate_logits`` it hands the verifier
(``_speculative_sampling`` softmaxes the same tensor as q).

The models (random weights from a seed, no download, CPU; V = 8):

* the target, ``Gemma4ForCausalLM`` of :func:`tiny_target_config`: four layers
  (sliding, full, sliding, full), the last two reading the first two's keys and
  values (``num_kv_shared_layers=2``), so its forward returns the
  ``shared_kv_states`` of both layer types that the assistant reads;
* the assistant, ``Gemma4AssistantForCausalLM`` of
  :func:`tiny_assistant_config`: **no decoder layer**. transformers 5.23.0
  constructs no assistant with a layer: ``Gemma4AssistantConfig`` sets every
  layer shared (``num_kv_shared_layers = num_hidden_layers``), and
  ``Gemma4TextConfig.kv_sharing_modes`` then raises ("The set of layer types
  producing a cache is different than the set of layer types using them") when
  the first layer is built. With none, the assistant is its own real code
  otherwise: ``pre_projection`` of [target embedding of the last token, target
  hidden state], the text model's final norm, ``lm_head``, ``post_projection``;
  its row depends on the context through the target's hidden state. What the
  missing layers would change is the logits' values, not how the generator
  turns logits into drafts and q.

The context is fixed per request: ``generate`` lets the target emit one token
before the first drafting round, so the prompt is the request's context
without its last token, and a ``LogitsProcessor`` handed to ``generate``
(``_ForceToken``) makes that first target token the context's last one.
The generator itself reads no processor, so drafts and q are exactly what it
computes from that context. ``num_assistant_tokens`` is the asked ``k``; the
generator drafts ``k`` tokens (no confidence stop). Randomness: the global
torch generator seeded with the request's seed inside ``torch.random.fork_rng``
(the caller's state is neither read nor advanced).

Declared: ``has_probs`` (the logits are returned), ``greedy`` (``do_sample=False``
at temperature 0), ``sampling = ()``: the generator is handed no logits
processor and reads none of the request's ``temperature``, ``top_k`` or
``top_p`` (its drafts and q at T = 0.7, top-k 3 or top-p 0.8 are those at
T = 1, token for token), so its q is checked as the raw row it is, at T = 1.
What the check finds at 5.23.0: every draft is the argmax of its logits,
whatever ``do_sample`` says, so the drafts are not drawn from the q it reports
(``law/position-*`` fail; at position 0 the measured TV is ``1 - max q``).

>>> prop = make_proposer()                                         # doctest: +SKIP
>>> prop.vocab_size, prop.sampling                                 # doctest: +SKIP
(8, ())
"""

from __future__ import annotations

import numpy as np

from specsim.field.engines.hf_candidates import Captured, FirstRoundCandidates

VOCAB_SIZE = 8
HIDDEN_SIZE = 16
INITIALIZER_RANGE = 0.3
"""Wider than transformers' 0.02, so that random rows are far from uniform (as ``hf_assisted.tiny_llama``'s)."""


def _text_config(**overrides):
    """A ``Gemma4TextConfig`` of hidden size 16 over V = 8 without per-layer inputs, MoE or wide MLPs."""
    from transformers import Gemma4TextConfig
    fields = dict(vocab_size=VOCAB_SIZE, hidden_size=HIDDEN_SIZE, intermediate_size=32, num_attention_heads=2,
                  num_key_value_heads=1, head_dim=8, global_head_dim=8, hidden_size_per_layer_input=0,
                  sliding_window=4, max_position_embeddings=64, initializer_range=INITIALIZER_RANGE,
                  pad_token_id=0, bos_token_id=2, eos_token_id=1)
    fields.update(overrides)
    return Gemma4TextConfig(**fields)


def tiny_target_config():
    """Four layers (sliding, full, sliding, full); the last two reuse the first two's keys and values."""
    return _text_config(num_hidden_layers=4, num_kv_shared_layers=2, vocab_size_per_layer_input=VOCAB_SIZE,
                        layer_types=["sliding_attention", "full_attention"] * 2)


def tiny_assistant_config():
    """The assistant of the tiny target: no decoder layer (the module docstring says why)."""
    from transformers import Gemma4AssistantConfig
    text = _text_config(num_hidden_layers=0, layer_types=[], vocab_size_per_layer_input=0)
    return Gemma4AssistantConfig(text_config=text, backbone_hidden_size=HIDDEN_SIZE)


def _seeded(build, config, seed: int):
    import torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build(config).eval()


def tiny_models(target_seed: int = 1, assistant_seed: int = 2):
    """(target ``Gemma4ForCausalLM``, assistant ``Gemma4AssistantForCausalLM``), random weights from the seeds."""
    from transformers import Gemma4AssistantForCausalLM, Gemma4ForCausalLM
    from transformers.utils import logging
    logging.set_verbosity_error()       # the configs' rope-parameter notices, once per model
    return (_seeded(Gemma4ForCausalLM, tiny_target_config(), target_seed),
            _seeded(Gemma4AssistantForCausalLM, tiny_assistant_config(), assistant_seed))


def _force_token(prompt_length: int, token: int):
    """A ``LogitsProcessor`` that makes the target's token after ``prompt_length`` tokens ``token``."""
    import torch
    from transformers import LogitsProcessor

    class _ForceToken(LogitsProcessor):
        def __call__(self, input_ids, scores):
            if input_ids.shape[1] != prompt_length:
                return scores
            forced = torch.full_like(scores, -float("inf"))
            forced[:, token] = 0.0
            return forced

    return _ForceToken()


class Gemma4AssistantCandidates(FirstRoundCandidates):
    """The first drafting round of ``SinglePositionMultiTokenCandidateGenerator`` per request (module docstring)."""

    sampling = ()

    def __init__(self, target, assistant):
        super().__init__(target, assistant, "SinglePositionMultiTokenCandidateGenerator")

    def _generate_until_drafted(self, context: tuple[int, ...], k: int, params, seed: int):
        """Run ``generate`` until the generator's first drafting round; its (candidate_ids, candidate_logits)."""
        from transformers import LogitsProcessorList
        torch, cls = self.torch, self.generator_class
        original = cls.get_candidates

        def capture(generator, input_ids, **kwargs):
            ids, logits = original(generator, input_ids, **kwargs)
            if logits is None:                 # the prefill round: the target speaks first
                return ids, logits
            raise Captured(ids, logits)

        self.assistant.generation_config.num_assistant_tokens = k
        prompt = torch.tensor([list(context[:-1])])
        processors = LogitsProcessorList([_force_token(prompt.shape[1], context[-1])])
        cls.get_candidates = capture
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(seed % (1 << 63))
                self.target.generate(prompt, attention_mask=torch.ones_like(prompt),   # every token, id 0 too
                                     assistant_model=self.assistant, max_new_tokens=k + 2,
                                     logits_processor=processors, pad_token_id=0, eos_token_id=None,
                                     **self._sampling_kwargs(params))
        except Captured as got:
            return got.candidate_ids, got.candidate_logits
        finally:
            cls.get_candidates = original
        raise RuntimeError("transformers' generate returned without a drafting round of "
                           "SinglePositionMultiTokenCandidateGenerator")

    def _one(self, request, k: int):
        context = tuple(int(t) for t in request.tokens)
        if len(context) < 2:
            raise ValueError(f"request {request.id}: context {list(context)}: this proposer needs at least 2 "
                             "tokens (the prompt, and the target's first token)")
        ids, logits = self._generate_until_drafted(context, k, request.params, int(request.seed))
        drafts = ids[0, len(context):].numpy().astype(np.int64)
        if ids[0, :len(context)].tolist() != list(context):
            raise RuntimeError(f"request {request.id}: generate drafted after {ids[0, :len(context)].tolist()}, "
                               f"not the context {list(context)}")
        if len(drafts) == 0:
            return None
        return drafts, self.torch.softmax(logits[0].double(), dim=-1).numpy()


def make_proposer(target_seed: int = 1, assistant_seed: int = 2) -> Gemma4AssistantCandidates:
    """The checked configuration: :func:`tiny_models` of the seeds."""
    return Gemma4AssistantCandidates(*tiny_models(target_seed, assistant_seed))


__all__ = ["Gemma4AssistantCandidates", "make_proposer", "tiny_models", "tiny_target_config",
           "tiny_assistant_config", "VOCAB_SIZE"]
