"""Every proposer of the simulated engine, in one place.

A proposer drafts for a batch of requests (the contract: ``base.Proposer``);
the engine merges what it returns with seed 004's ``top1_propose``.

| module | proposer |
|---|---|
| `base.py` | the `Proposer` protocol; `top1_propose` (seed 004's Top1 merge) |
| `law.py` | `draft_law`: the softmax-at-temperature row a draft is sampled from |
| `draft_model.py` | `DraftModelProposer`, `EagleProposer` (keyed autoregressive chains) |
| `ngram.py` | `NgramProposer` (prompt lookup, point proposals) |
| `universal.py` | `UniversalDraftProposer` (TLI across vocabularies, seed 001) |
| `ptd.py` | `PtdProposer` (parallel token drafting, seed 002) |
| `factory.py` | `make_platform_proposer`: the seeds' platforms for a synthetic workload |
| `tree.py` | `TreeProposer` (EAGLE-style top-k trees, SPEC §11; verified by `specsim.engine.tree_loop`) |
| `processed.py` | `ProcessedDraftProposer` (drafts through its own temperature/top-k/top-p; the proposer mutants edit it) |
| `checked.py` | the proposers `specsim proposer` knows by name (`specsim.conformance.proposer.proposers`) |

Layering: this package imports ``specsim.vocab.mapping`` (tokenizers and the
TLI mapping), which imports nothing of the engine at run time.
"""

from specsim.engine.proposers.base import Proposal, Proposer, top1_propose
from specsim.engine.proposers.draft_model import DraftModelProposer, EagleProposer
from specsim.engine.proposers.factory import make_platform_proposer, tokenizer_pair
from specsim.engine.proposers.law import draft_law
from specsim.engine.proposers.ngram import NgramProposer
from specsim.engine.proposers.ptd import PtdProposer
from specsim.engine.proposers.tree import TreeProposer
from specsim.engine.proposers.universal import UniversalDraftProposer

__all__ = ["Proposal", "Proposer", "top1_propose", "draft_law", "DraftModelProposer", "EagleProposer",
           "NgramProposer", "UniversalDraftProposer", "PtdProposer", "TreeProposer", "make_platform_proposer", "tokenizer_pair"]
