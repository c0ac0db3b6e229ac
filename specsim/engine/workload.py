"""A synthetic workload: toy models, a proposer and requests, all from one seed.

Prompts are keyed words (``reference.rng`` ENGINE stream, position = request
index) reduced mod V, so a workload is reproducible and independent of any
global RNG.

>>> w = Workload(num_requests=4, prompt_len=3, output_len=5, proposer="draft", k=2, temperature=0.0, device="reference")
>>> engine = build_engine(w)
>>> out = engine.run()
>>> sorted(len(v) for v in out.values()) == [5, 5, 5, 5]
True
"""

from __future__ import annotations

from dataclasses import dataclass

from reference.rng import ENGINE, stream_words
from specsim.engine.engine import Engine
from specsim.engine.models import ToyLM
from specsim.engine.proposers import DraftModelProposer, EagleProposer, NgramProposer, make_platform_proposer
from specsim.engine.scheduler import SchedulerConfig
from specsim.engine.state import SamplingParams

PROPOSERS = ("draft", "eagle", "ngram", "ptd", "universal", "none")


@dataclass(frozen=True)
class Workload:
    num_requests: int = 64
    prompt_len: int = 16
    output_len: int = 64
    proposer: str = "draft"
    k: int = 4
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    vocab_size: int = 64
    order: int = 2
    closeness: float = 0.7
    eos: bool = False                 # give the target an EOS id (0)
    max_model_len: int = 4096
    block_size: int = 16
    num_blocks: int = 4096
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 8192
    partial_drafts: bool = False
    draft_probs: bool = True          # seed 003's kill switch when False
    device: str = "torch"

    def __post_init__(self):
        if self.proposer not in PROPOSERS:
            raise ValueError(f"proposer: must be one of {PROPOSERS}, got {self.proposer!r}")


def make_proposer(w: Workload, target: ToyLM):
    if w.proposer == "draft":
        return DraftModelProposer(target.mixed(w.closeness, seed=w.seed + 1), use_probs=w.draft_probs)
    if w.proposer == "eagle":
        return EagleProposer(target.mixed(w.closeness, seed=w.seed + 2), use_probs=w.draft_probs)
    if w.proposer == "ngram":
        return NgramProposer(w.vocab_size)
    if w.proposer in ("ptd", "universal"):  # the seeds' platforms
        return make_platform_proposer(w.proposer, target, seed=w.seed, closeness=w.closeness, draft_probs=w.draft_probs)
    return None


def _device(name: str):
    if name == "reference":
        from specsim.judge.reference_device import ReferenceDevice
        return ReferenceDevice()
    return name


def prompts(w: Workload) -> list[list[int]]:
    return [(stream_words(w.seed, i, ENGINE, 1, w.prompt_len) % w.vocab_size).astype(int).tolist()
            for i in range(w.num_requests)]


def build_engine(w: Workload, *, add: bool = True, **engine_kw) -> Engine:
    """The engine of a workload, with its requests added (ids ``r0 … r{n-1}``) unless ``add=False``."""
    target = ToyLM(w.vocab_size, w.order, seed=w.seed, eos_id=0 if w.eos else None,
                   max_position=max(w.max_model_len, 1))
    config = SchedulerConfig(max_num_seqs=w.max_num_seqs, max_num_batched_tokens=w.max_num_batched_tokens,
                             block_size=w.block_size, num_blocks=w.num_blocks, partial_drafts=w.partial_drafts)
    engine = Engine(target, make_proposer(w, target), device=_device(w.device), num_speculative_tokens=w.k,
                    scheduler=config, seed=w.seed, max_model_len=w.max_model_len, **engine_kw)
    if add:
        params = SamplingParams(temperature=w.temperature, top_k=w.top_k, top_p=w.top_p, max_tokens=w.output_len)
        for i, prompt in enumerate(prompts(w)):
            engine.add_request(f"r{i}", prompt, params)
    return engine
