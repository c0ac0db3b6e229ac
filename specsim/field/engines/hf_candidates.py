"""HF transformers' assisted-generation candidate generator as a proposer (``specsim proposer transformers-assisted``).

What runs is ``transformers.generation.candidate_generator.AssistedCandidateGenerator``
of the pinned release (``devices.field.hf_transformers.PINNED_VERSION``),
built by ``target.generate(prompt, assistant_model=assistant, ...)`` itself —
with the processors ``generate`` prepares for the request's ``do_sample``,
``temperature``, ``top_k`` and ``top_p`` — and stopped after its first
``get_candidates`` call: the drafts are the candidate ids after the prompt,
``draft_probs`` the softmax (float64) of the ``candidate_logits`` it hands the
verifier (``_speculative_sampling`` softmaxes the same tensor). The models are
``specsim.field.engines.hf_assisted.tiny_llama`` (random weights from a seed, no
download, CPU; V = 8). Randomness: the global torch generator seeded with the
request's seed inside ``torch.random.fork_rng`` (the caller's state is
neither read nor advanced). The attention mask is all ones: the models' pad
id is 0, which ``generate`` would otherwise mask out of a context holding it. ``num_assistant_tokens`` is the asked ``k`` with
the ``"constant"`` schedule; transformers' assistant confidence threshold
(0.4 by default) may stop a round early, so ``k' ≤ k`` — the stop is a
function of the drafted prefix, so the check's conditioning on the prefix
stays exact.

Declared: ``has_probs`` (the logits are returned), ``greedy`` (``do_sample=False``
at temperature 0), ``sampling = ("temperature", "top_k", "top_p")`` (the
warpers of ``generate``, given to the assistant).

>>> prop = make_proposer()                                         # doctest: +SKIP
>>> prop.vocab_size, prop.sampling                                 # doctest: +SKIP
(8, ('temperature', 'top_k', 'top_p'))
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from devices.field.hf_transformers import PINNED_VERSION
from specsim.field.engines.hf_assisted import VOCAB_SIZE, tiny_llama


class Captured(Exception):
    """Carries a drafting round's candidates out of ``generate``."""

    def __init__(self, candidate_ids, candidate_logits):
        super().__init__("first drafting get_candidates call")
        self.candidate_ids, self.candidate_logits = candidate_ids, candidate_logits


class FirstRoundCandidates:
    """What a proposer over one of transformers' candidate generators shares: the pinned release, the target and
    its assistant (a constant number of drafts a round), ``generator_class`` (``generator``, a class of
    ``transformers.generation.candidate_generator``), and ``generate``'s sampling arguments. A subclass's
    ``_one(request, k)`` captures the first drafting round of one request."""

    has_probs = True
    greedy = True
    max_len = None

    def __init__(self, target, assistant, generator: str):
        import torch
        import transformers
        from transformers.generation import candidate_generator
        if transformers.__version__ != PINNED_VERSION:
            raise ImportError(f"{type(self).__module__} is checked against transformers {PINNED_VERSION}, "
                              f"found {transformers.__version__}")
        self.torch, self.generator_class = torch, getattr(candidate_generator, generator)
        self.target, self.assistant = target, assistant
        self.vocab_size = target.config.vocab_size
        self.name = f"transformers-{transformers.__version__}-{generator}"
        self.engine = f"transformers {transformers.__version__}"
        assistant.generation_config.num_assistant_tokens_schedule = "constant"

    def propose(self, requests: Sequence, ks: np.ndarray) -> list:
        return [self._one(r, int(k)) for r, k in zip(requests, ks)]

    def _sampling_kwargs(self, params) -> dict:
        if params.temperature == 0:
            return {"do_sample": False}
        return {"do_sample": True, "temperature": float(params.temperature), "top_k": int(params.top_k),
                "top_p": float(params.top_p)}

    def _one(self, request, k: int):
        raise NotImplementedError


class AssistedCandidates(FirstRoundCandidates):
    """The first round of ``AssistedCandidateGenerator`` per request (module docstring)."""

    sampling = ("temperature", "top_k", "top_p")

    def __init__(self, target, assistant):
        super().__init__(target, assistant, "AssistedCandidateGenerator")
        from transformers.utils import logging
        logging.set_verbosity_error()

    def _one(self, request, k: int):
        torch, cls = self.torch, self.generator_class
        original = cls.get_candidates

        def capture(generator, input_ids, **kwargs):
            raise Captured(*original(generator, input_ids, **kwargs))

        self.assistant.generation_config.num_assistant_tokens = k
        prompt = torch.tensor([list(request.tokens)])
        cls.get_candidates = capture
        try:
            with torch.random.fork_rng(devices=[]), torch.no_grad():
                torch.manual_seed(int(request.seed) % (1 << 63))
                self.target.generate(prompt, attention_mask=torch.ones_like(prompt),   # every token, id 0 too
                                     assistant_model=self.assistant, max_new_tokens=k + 2,
                                     pad_token_id=0, eos_token_id=None, **self._sampling_kwargs(request.params))
        except Captured as got:
            ids = got.candidate_ids[0, prompt.shape[1]:].numpy().astype(np.int64)
            if got.candidate_logits is None or len(ids) == 0:
                return None
            logits = got.candidate_logits[0].double()
            return ids, torch.softmax(logits, dim=-1).numpy()
        finally:
            cls.get_candidates = original
        raise RuntimeError("transformers' generate returned without asking the candidate generator")


def make_proposer(target_seed: int = 1, assistant_seed: int = 2) -> AssistedCandidates:
    """The checked configuration: target and assistant as ``specsim.field.engines.hf_assisted.engines`` builds them."""
    return AssistedCandidates(tiny_llama(VOCAB_SIZE, target_seed), tiny_llama(VOCAB_SIZE, assistant_seed))


__all__ = ["AssistedCandidates", "Captured", "FirstRoundCandidates", "make_proposer"]
