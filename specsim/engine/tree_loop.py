"""Tree speculative decoding of one request on the toy models (SPEC §11), and the chain-vs-tree table.

The engine's step loop does the same for a batch, with paged KV, preemption
and a token budget (``specsim/engine/engine.py``, docs/trees.md); this loop
is one request alone, for the acceptance table: draft a tree
(``TreeProposer``), compute the target row of every slot from its path (the
root's context, then each node's path), verify with
the device's ``verify_tree`` under keyed noise — seed and position ``L``, so
a replay gives the same tokens — and append the emitted tokens.

``python -m specsim.engine.tree_loop`` prints acceptance against chain
drafting (docs/trees.md quotes it).

>>> from specsim.engine.models import ToyLM
>>> from devices.torch_device import make_cpu_device
>>> target = ToyLM(8, order=2, seed=3)
>>> run = tree_decode(target, TreeProposer(target.mixed(0.7, seed=4), depth=3), make_cpu_device(), [1, 2], 12,
...                   temperature=0.0)
>>> run.tokens == target.greedy_chain([1, 2], 12)
True
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from devices.protocol import TreeBatch
from specsim.engine.models import ToyLM
from specsim.engine.proposers.tree import TreeProposer


@dataclass
class TreeRun:
    tokens: list[int]                                   # the generated tokens (prompt excluded)
    accepted: list[int] = field(default_factory=list)   # drafts accepted per step
    nodes: list[int] = field(default_factory=list)      # tree size per step

    @property
    def mean_accepted(self) -> float:
        return float(np.mean(self.accepted)) if self.accepted else 0.0


def slot_logits(target: ToyLM, context: Sequence[int], parents: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``[N + 1, V]``: the target's logits after the context (root), then after each node's path."""
    paths: list[list[int]] = []
    for p, token in zip(parents, ids):
        paths.append((paths[p] if p >= 0 else []) + [int(token)])
    return np.stack([target.next_logits(list(context))] + [target.next_logits(list(context) + q) for q in paths])


def tree_decode(target: ToyLM, proposer: TreeProposer, device, prompt: Sequence[int], max_tokens: int, *,
                temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0, scheme: str = "rrs",
                max_model_len: int = 1 << 30) -> TreeRun:
    """Generate ``max_tokens`` tokens (fewer at ``max_model_len`` or EOS) with tree drafts."""
    context, run = list(prompt), TreeRun([])
    while len(run.tokens) < max_tokens and len(context) < max_model_len:
        room = max_model_len - 1 - len(context)           # drafts at L .. L+d-1, the emitted one at L+d
        parents, ids = proposer.propose_tree(context, temperature or 1.0, max_depth=room) if room > 0 else \
            (np.zeros(0, np.int64), np.zeros(0, np.int64))
        batch = TreeBatch(np.array([len(ids)]), parents, ids, None, slot_logits(target, context, parents, ids),
                          np.array([temperature]), np.array([top_k]), np.array([top_p]),
                          seeds=np.array([seed], np.uint64), positions=np.array([len(context)]), scheme=scheme)
        out = device.verify_tree(batch)
        emitted = out.emitted(0)[: max_tokens - len(run.tokens)]
        run.accepted.append(int(out.num_accepted[0]))
        run.nodes.append(len(ids))
        for token in emitted:
            run.tokens.append(token)
            context.append(token)
            if token == target.eos_id:
                return run
    return run


SHAPES = {"chain K=4": (4, 1, 1), "chain K=8": (8, 1, 1), "tree 4x2 (w=1)": (4, 2, 1),
          "tree 4x2 (w=2)": (4, 2, 2), "tree 4x3 (w=2)": (4, 3, 2)}
"""name → (depth, branch, width); chains are top-1 drafts verified as point proposals."""


def acceptance_table(vocab_size: int = 32, closeness: float = 0.7, temperature: float = 1.0, prompts: int = 20,
                     tokens: int = 64, device=None) -> list[dict]:
    """Mean accepted drafts per step, emitted tokens per step and nodes per step, per drafting shape."""
    if device is None:
        from devices.torch_device import make_cpu_device
        device = make_cpu_device()
    target = ToyLM(vocab_size, order=2, seed=1)
    drafter = target.mixed(closeness, seed=2)
    rows = []
    for name, (depth, branch, width) in SHAPES.items():
        proposer = TreeProposer(drafter, depth=depth, branch=branch, width=width)
        runs = [tree_decode(target, proposer, device, [p % vocab_size, (3 * p + 1) % vocab_size], tokens,
                            temperature=temperature, seed=p) for p in range(prompts)]
        accepted = np.concatenate([r.accepted for r in runs])
        rows.append({"drafting": name, "nodes": float(np.mean(np.concatenate([r.nodes for r in runs]))),
                     "accepted": float(accepted.mean()), "emitted": float(accepted.mean() + 1),
                     "steps": int(len(accepted))})
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab-size", type=int, default=32)
    parser.add_argument("--closeness", type=float, default=0.7)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--prompts", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=64)
    a = parser.parse_args(argv)
    print(f"V={a.vocab_size} closeness={a.closeness} T={a.temperature} prompts={a.prompts} tokens={a.tokens} "
          "(torch device, keyed noise, scheme rrs, point proposals)")
    print("| drafting | nodes/step | accepted/step | emitted/step | steps |\n|---|---|---|---|---|")
    for r in acceptance_table(a.vocab_size, a.closeness, a.temperature, a.prompts, a.tokens):
        print(f"| {r['drafting']} | {r['nodes']:.1f} | {r['accepted']:.2f} | {r['emitted']:.2f} | {r['steps']} |")


if __name__ == "__main__":
    main()


__all__ = ["TreeRun", "slot_logits", "tree_decode", "acceptance_table", "SHAPES"]
