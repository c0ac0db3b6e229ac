"""HF transformers' assisted generation as a ``GenerateEngine``: tiny random-weight Llama models, CPU, no download.

``HFAssisted.sample`` is ``target.generate(prompt, assistant_model=assistant,
do_sample=True, temperature=..., top_k=..., top_p=...)`` — transformers' whole
speculative loop: the assistant drafts ``draft_tokens`` a round with the
same processors, the target verifies (``_speculative_sampling``) — seeded
through the global torch generator inside ``torch.random.fork_rng``.
``next_token_law`` is the target alone: its logits for prompt + prefix, through
transformers' own warpers (``devices.field.hf_transformers.warpers``, built
as ``generate`` builds them), softmaxed in float64. ``greedy`` runs
``generate(do_sample=False)`` with and without the assistant.

Models come from configs (``tiny_llama``): weights drawn from a seed with a
large ``initializer_range`` so the laws are far from uniform, and target and
assistant differ (drafts are rejected often enough to exercise the residual).
"""

from __future__ import annotations

import numpy as np

from devices.field.hf_transformers import PINNED_VERSION, warpers


def tiny_llama(vocab_size: int, seed: int, initializer_range: float = 0.3):
    """A one-layer Llama of hidden size 16 with random weights from ``seed`` (no hub download)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         initializer_range=initializer_range, pad_token_id=0, bos_token_id=None, eos_token_id=None)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).eval()


class HFAssisted:
    """One configuration of transformers' assisted generation (see the module docstring)."""

    def __init__(self, target, assistant, prompt: tuple[int, ...], new_tokens: int, *, temperature: float = 1.0,
                 top_k: int = 0, top_p: float = 1.0, draft_tokens: int = 2):
        import torch
        import transformers
        if transformers.__version__ != PINNED_VERSION:
            raise ImportError(f"specsim.field.engines.hf_assisted is checked against transformers {PINNED_VERSION}, "
                              f"found {transformers.__version__}")
        self.torch = torch
        self.target, self.assistant = target, assistant
        self.prompt = tuple(prompt)
        self.new_tokens = new_tokens
        self.vocab_size = target.config.vocab_size
        self.sampling = dict(temperature=temperature, top_k=top_k, top_p=top_p)
        assistant.generation_config.num_assistant_tokens = draft_tokens
        assistant.generation_config.num_assistant_tokens_schedule = "constant"
        self.name = (f"transformers-{transformers.__version__}-assisted/T{temperature:g}-k{top_k}-p{top_p:g}"
                     f"-draft{draft_tokens}")

    def _generate(self, assistant, **kw) -> tuple[int, ...]:
        ids = self.torch.tensor([self.prompt])
        with self.torch.no_grad():
            out = self.target.generate(ids, assistant_model=assistant, max_new_tokens=self.new_tokens,
                                       min_new_tokens=self.new_tokens, pad_token_id=0, eos_token_id=None, **kw)
        return tuple(int(t) for t in out[0, len(self.prompt):])

    def sample(self, seed: int) -> tuple[int, ...]:
        with self.torch.random.fork_rng(devices=[]):
            self.torch.manual_seed(seed)
            return self._generate(self.assistant, do_sample=True, **self.sampling)

    def next_token_law(self, prefix: tuple[int, ...]) -> np.ndarray:
        torch = self.torch
        with torch.no_grad():
            logits = self.target(torch.tensor([self.prompt + tuple(prefix)])).logits[:, -1].float()   # [1, V]
        processed = warpers(**self.sampling)(None, logits)[0].double()
        return torch.softmax(processed, dim=-1).numpy()

    def greedy(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return self._generate(self.assistant, do_sample=False), self._generate(None, do_sample=False)


CONFIGS = (dict(temperature=0.9, top_k=5, top_p=0.9), dict(temperature=1.3))
"""The configurations checked: every processor at once, and temperature alone (every sequence possible)."""

VOCAB_SIZE, PROMPT, NEW_TOKENS = 8, (1, 2, 3), 3


def engines(configs=CONFIGS) -> list[HFAssisted]:
    """The checked engines: target seed 1, assistant seed 2, V = 8, prompt (1, 2, 3), three new tokens."""
    target, assistant = tiny_llama(VOCAB_SIZE, 1), tiny_llama(VOCAB_SIZE, 2)
    return [HFAssisted(target, assistant, PROMPT, NEW_TOKENS, **c) for c in configs]


def main(argv=None) -> int:
    """``python -m specsim.field.engines.hf_assisted --samples N [--out FILE]``: the check, printed and as JSON."""
    import argparse
    import json
    import sys
    import time

    from specsim.field.engines.check import check_engine
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=1000, help="sequences sampled per configuration")
    p.add_argument("--alpha", type=float, default=1e-3, help="α of each configuration's sequence-law test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    from transformers.utils import logging
    logging.set_verbosity_error()
    results, start = [], time.perf_counter()
    for engine in engines():
        results += check_engine(engine, args.samples, alpha=args.alpha, seed=args.seed)
    for r in results:
        print(f"{r.name}  {r.status}  {r.detail.splitlines()[0][:160]}")
    seconds = time.perf_counter() - start
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"command": "python -m specsim.field.engines.hf_assisted " + " ".join(sys.argv[1:] if argv is None
                                                                                     else argv),
                       "seconds": round(seconds, 1), "checks": [r.to_json() for r in results]}, f, indent=1)
    return 0 if all(r.status == "pass" for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
