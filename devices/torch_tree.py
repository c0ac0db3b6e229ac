"""Tree verification (SPEC §11) in torch, vectorised over the batch: one pass per depth, one per sibling.

Every request walks its tree from the root at once: at each depth the
current node's siblings are tried in node order, each try a few ``[B, V]``
ops, so a step costs ``(D + 1) × S`` of them (D the batch's largest depth, S
its largest sibling count) whatever the batch size. The SPEC rules come from
``devices.torch_sampling`` (target rows, greedy argmax, the race); what is
the tree's own is here:

* **links** (§11.1): ``tree_links`` turns ``parents`` into first-child /
  next-sibling links (SGLang's ``retrive_next_token`` / ``retrive_next_sibling``)
  indexed by *slot*, the target row a node's children are verified against
  (request i's root is row ``cu[i] + i``, node n's row ``cu[i] + i + 1 + n``);
* **one sibling** (§11.2–§11.4): ``rrs_try`` (accept ``u < r(x)/d(x)``, else
  ``r ← norm(max(r − d, 0))``), ``sglang_try`` (one coin per level against the
  running sum ``A``, thresholds), the greedy match;
* **the walk**: ``verify_tree_tensors``.

Residuals and ratios are float64 (``torch_sampling.DECISION_DTYPE``), as the
chain's coins are.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from devices import torch_sampling as ts
from devices.protocol import PLACEHOLDER_TOKEN_ID

F64 = ts.DECISION_DTYPE


class TreeLinks(NamedTuple):
    """The tree as links, all int64 on the device (host-built: the layout is input, not noise).

    - ``first_child``: ``[num_nodes_total + B]`` per slot (target row), a global node or -1;
    - ``next_sibling``: ``[num_nodes_total]`` per node, a global node or -1;
    - ``node_row``: ``[num_nodes_total]`` each node's own slot (target row);
    - ``node_start``: ``[num_nodes_total]`` its request's first node (``cu[i]``);
    - ``max_depth``, ``max_siblings``: Python ints (loop bounds).
    """

    first_child: torch.Tensor
    next_sibling: torch.Tensor
    node_row: torch.Tensor
    node_start: torch.Tensor
    max_depth: int
    max_siblings: int


def tree_links(num_nodes: np.ndarray, parents: np.ndarray, depths: np.ndarray, device) -> TreeLinks:
    """Links of a valid tree batch (``num_nodes [B]``, ``parents [N]`` request-local, ``depths [N]``).

    >>> links = tree_links(np.array([4, 0]), np.array([-1, -1, 0, 1]), np.array([1, 1, 2, 2]), "cpu")
    >>> links.first_child.tolist(), links.next_sibling.tolist(), links.node_row.tolist()
    ([0, 2, 3, -1, -1, -1], [1, -1, -1, -1], [1, 2, 3, 4])
    """
    counts = np.asarray(num_nodes, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])[:-1]
    request = np.repeat(np.arange(len(counts)), counts)
    node_start = starts[request]
    node_row = np.arange(len(parents)) + request + 1
    parent_row = np.where(parents < 0, starts[request] + request, node_start + parents + request + 1)
    first_child = np.full(len(parents) + len(counts), -1, np.int64)
    next_sibling = np.full(len(parents), -1, np.int64)
    last_child = {}
    for n in range(len(parents)):            # node order is sibling order
        row = int(parent_row[n])
        if row in last_child:
            next_sibling[last_child[row]] = n
        else:
            first_child[row] = n
        last_child[row] = n
    siblings = np.bincount(parent_row, minlength=1).max(initial=0) if len(parents) else 0
    as_tensor = lambda a: torch.as_tensor(np.asarray(a, np.int64), device=device)  # noqa: E731
    return TreeLinks(as_tensor(first_child), as_tensor(next_sibling), as_tensor(node_row), as_tensor(node_start),
                     int(np.max(depths, initial=0)), int(siblings))


def _at(rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``rows[b, ids[b]]`` → ``[B]``; ``rows [B, V]``, ``ids [B]`` in ``[0, V)``."""
    return rows.gather(1, ids.unsqueeze(1)).squeeze(1)


def rrs_try(residual: torch.Tensor, draft_rows: torch.Tensor | None, x: torch.Tensor, real: torch.Tensor,
            coins: torch.Tensor, trying: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """§11.3, one sibling per request: (accepted ``[B]``, the residual after it ``[B, V]``).

    ``residual [B, V]`` float64 normalised; ``draft_rows [B, V]`` (None: point, one-hot of
    ``x``); ``x [B]`` ids clamped to ``[0, V)``, ``real [B]`` not a placeholder; ``coins [B]``;
    ``trying [B]`` the requests this sibling is tried for. A rejected real sibling turns the
    residual into ``norm(max(r − d, 0))``, or leaves it if that is empty.
    """
    if draft_rows is None:
        d = torch.zeros_like(residual).scatter_(1, x.unsqueeze(1), 1.0)
    else:
        d = draft_rows.to(F64)
    r_x, d_x = _at(residual, x), _at(d, x)
    drawable = real & (r_x > 0) & (d_x > 0)
    accepted = trying & drawable & (coins < r_x / torch.where(d_x > 0, d_x, torch.ones_like(d_x)))
    w = (residual - d).clamp_min(0)
    total = w.sum(dim=1, keepdim=True)
    update = (trying & real & ~accepted).unsqueeze(1) & (total > 0)
    return accepted, torch.where(update, w / torch.where(total > 0, total, torch.ones_like(total)), residual)


def sglang_try(target: torch.Tensor, kept: torch.Tensor, running: torch.Tensor, x: torch.Tensor, real: torch.Tensor,
               coin: torch.Tensor, trying: torch.Tensor, threshold_single: float, threshold_acc: float):
    """§11.4, one sibling per request: (accepted ``[B]``, ``kept [B, V]``, ``running [B]``).

    ``target [B, V]`` the level's unmodified row (float64); ``running`` the sum ``A`` of the
    siblings' ``t(x)`` so far; ``coin [B]`` the level's one coin; ``kept`` the mask of tokens
    the residual keeps (every rejected sibling's token is dropped).
    """
    t_x = torch.where(real, _at(target, x), torch.zeros_like(running))
    running = torch.where(trying, running + t_x, running)
    # t(x) > 0 first: a zero-probability sibling is never accepted, not even at threshold_single = 0
    accepted = trying & real & (t_x > 0) & ((t_x >= threshold_single) | (coin * threshold_acc < running))
    drop = (trying & real & ~accepted).unsqueeze(1) & (torch.arange(target.shape[1], device=x.device) == x.unsqueeze(1))
    return accepted, kept & ~drop, running


def verify_tree_tensors(num_nodes: torch.Tensor, links: TreeLinks, draft_token_ids: torch.Tensor,
                        draft_probs: torch.Tensor | None, target_logits: torch.Tensor, temperature: torch.Tensor,
                        top_k: torch.Tensor, top_p: torch.Tensor, uniforms: torch.Tensor | None,
                        exponentials: torch.Tensor | None, *, scheme: str = "rrs", threshold_single: float = 1.0,
                        threshold_acc: float = 1.0):
    """One tree step on tensors (SPEC §11). Shapes: ``num_nodes [B]``, ``draft_token_ids [N]``,
    ``draft_probs [N, V]`` or None, ``target_logits [N + B, V]``, ``temperature/top_k/top_p [B]``,
    ``uniforms [N]`` and ``exponentials [B, V]`` float64 (None only if every request is greedy).

    Returns ``(output_token_ids [B, D + 1], num_accepted [B], accepted_nodes [B, D])`` int64.
    """
    batch, device = num_nodes.shape[0], target_logits.device
    num_rows = target_logits.shape[0]
    D = links.max_depth
    greedy = temperature == 0
    row_request = ts.target_row_requests(num_nodes, num_rows)
    rows = ts.SamplingRows(ts.safe_temperature(temperature), top_k, top_p).take(row_request)
    filters = dict(use_top_k=bool(ts.uses_top_k(temperature, top_k, target_logits.shape[1]).any()),
                   use_top_p=bool(ts.uses_top_p(temperature, top_p).any()))          # skip the sort when unused
    probs = ts.target_probs(target_logits, rows, **filters).to(F64) if bool((~greedy).any()) else None
    argmax = ts.greedy_argmax(target_logits)
    arange = torch.arange(batch, device=device)
    slot = torch.cumsum(num_nodes, 0) - num_nodes + arange                      # each request's root row
    live = torch.ones(batch, dtype=torch.bool, device=device)
    path = torch.full((batch, D), -1, dtype=torch.int64, device=device)
    num_accepted = torch.zeros(batch, dtype=torch.int64, device=device)
    weights = torch.zeros(batch, target_logits.shape[1], dtype=F64, device=device)
    token = torch.zeros(batch, dtype=torch.int64, device=device)
    no_node = torch.full_like(slot, -1)
    for depth in range(D + 1):
        sibling = torch.where(live, links.first_child[slot], no_node)
        target = probs[slot] if probs is not None else weights       # the current node's row: its children's law
        residual, kept = target, torch.ones_like(target, dtype=torch.bool)
        running = torch.zeros(batch, dtype=F64, device=device)
        level_coin = uniforms[sibling.clamp(min=0)] if uniforms is not None and len(uniforms) else running
        chosen = no_node
        for _ in range(links.max_siblings):
            trying = (sibling >= 0) & (chosen < 0)
            node = sibling.clamp(min=0)
            x = draft_token_ids[node] if len(draft_token_ids) else no_node
            real = x != PLACEHOLDER_TOKEN_ID
            x = x.clamp(min=0)
            accepted = trying & real & (x == argmax[slot])                        # §11.2
            if probs is not None and scheme == "rrs":
                coins = uniforms[node]
                sampled, residual = rrs_try(residual, None if draft_probs is None else draft_probs[node], x, real,
                                            coins, trying & ~greedy)
                accepted = torch.where(greedy, accepted, sampled)
            elif probs is not None:
                sampled, kept, running = sglang_try(target, kept, running, x, real, level_coin, trying & ~greedy,
                                                    threshold_single, threshold_acc)
                accepted = torch.where(greedy, accepted, sampled)
            chosen = torch.where(accepted, sibling, chosen)
            sibling = torch.where(trying & ~accepted, links.next_sibling[node], sibling)
        if probs is not None and scheme == "sglang":
            residual = torch.where(kept, target, torch.zeros_like(target))
        stop = live & (chosen < 0)
        empty = ~(residual > 0).any(dim=1, keepdim=True)
        weights = torch.where(stop.unsqueeze(1), torch.where(empty, target, residual), weights)
        token = torch.where(stop, argmax[slot], token)
        moved = live & (chosen >= 0)
        if depth < D:
            path[:, depth] = torch.where(moved, chosen - links.node_start[chosen.clamp(min=0)], path[:, depth])
        num_accepted += moved
        if len(links.node_row):                   # a batch without nodes has nowhere to move
            slot = torch.where(moved, links.node_row[chosen.clamp(min=0)], slot)
        live = moved
    if probs is not None:
        token = torch.where(greedy, token, ts.race(weights, exponentials))
    global_path = torch.where(path >= 0, path + (torch.cumsum(num_nodes, 0) - num_nodes).unsqueeze(1), path)
    drafts = draft_token_ids[global_path.clamp(min=0)] if len(draft_token_ids) else path
    tokens = torch.cat([drafts, torch.full_like(token.unsqueeze(1), PLACEHOLDER_TOKEN_ID)], dim=1)
    return ts.emitted_rows(tokens, num_accepted, token), num_accepted, path


__all__ = ["TreeLinks", "tree_links", "rrs_try", "sglang_try", "verify_tree_tensors"]
