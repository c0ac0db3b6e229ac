"""Tree verification (SPEC §11) in Triton: one program per request walks its tree, reading the rows it visits.

Only the rows a walk visits are read: the kernel ``tree_walk`` reads each visited row once for
its maximum, softmax sum and greedy argmax in float64 (``_row_stats``, through the row's
top-k/top-p cut where a request filters: ``triton_device.filter_cuts``), makes its target
probabilities from its logits where it reads them (float64, ``_target``) — keyed noise comes
from ``devices.torch_philox`` and the tree's links from ``devices.torch_tree.tree_links`` — and
does the rest for request ``b``: from the root slot it tries
each sibling in link order — rrs: ``u < r(x)/d(x)`` and, on rejection, two
passes over V (``w = max(r − d, 0)``, its sum, then ``w / sum``) on a
per-request residual row in global scratch; sglang: the running sum against
one coin per level, a rejected sibling's token zeroed in the scratch row;
greedy: the first child equal to the row's argmax — then the race
``argmax w/E`` over V in tiles (lowest id on ties: a tile's ``tl.argmax``
takes the first maximum, and a later tile must be strictly better).

The scratch row is written only once a level rejects: until then the residual is the
row's own target (``fresh``), read from its logits where needed (``_residual_tile``), so
a walk that accepts to the leaf reads each visited row once and the leaf's once more for
the race, and writes nothing but its outputs (docs/trees.md has its timings).

The residual row is written by every lane and read back as scalars, so each
write pass ends with ``tl.debug_barrier()``: without them the compiled kernel
raced on an H100 (2 mismatches in ~100 cases; the interpreter, sequential,
cannot show it).

Launch: ``tree_walk[(B,)](...)``; shapes in ``verify_tree_triton``.
"""

from __future__ import annotations

import numpy as np
import triton
import triton.language as tl

BLOCK = 8192  # the walk's tile: the fastest of tools/gpu/tree_sweep.py's tiles × warps on an H100 at 64
WARPS = 16    # requests × V = 128256, for trees rejected at the root and accepted to depth alike


@triton.jit
def _residual_tile(resid_row, row, idx, m, fresh, floor, row_max, inv_t, row_sum):
    """The residual's entries ``idx``: the row's target probabilities while ``fresh`` (the scratch row
    not yet written at this level), else the scratch row's."""
    if fresh:
        z = tl.load(row + idx, mask=m, other=float("-inf")).to(tl.float64)
        r = tl.where(m, _target(z, floor, row_max, inv_t, row_sum), 0.0)
    else:
        r = tl.load(resid_row + idx, mask=m, other=0.0)
    return r


@triton.jit
def _residual_update(resid_row, draft_row, x, V, fresh, row, floor, row_max, inv_t, row_sum,
                     HAS_DRAFT: tl.constexpr, BLOCK: tl.constexpr, TILES: tl.constexpr):
    """``r ← max(r − d, 0) / Σ`` into the scratch row (unchanged if the sum is 0); ``d`` the draft
    row or one-hot(x); ``r`` the row's target probabilities while ``fresh``. Returns whether the
    residual is still the row's own target (``fresh`` and a zero sum: nothing written)."""
    offs = tl.arange(0, BLOCK)
    total = row_max.to(tl.float64) * 0.0              # a float64 zero: loop-carried types must not change
    for tile in range(0, TILES):  # a constexpr trip count (the interpreter's range wants constants)
        idx = tile * BLOCK + offs
        m = idx < V
        r = _residual_tile(resid_row, row, idx, m, fresh, floor, row_max, inv_t, row_sum)
        if HAS_DRAFT:
            d = tl.load(draft_row + idx, mask=m, other=0.0).to(r.dtype)
        else:
            d = (idx == x).to(r.dtype)
        total += tl.sum(tl.maximum(r - d, 0.0), axis=0)
    if total > 0:
        tl.debug_barrier()                            # every lane's earlier reads of the scratch row are done
        for tile in range(0, TILES):  # a constexpr trip count (the interpreter's range wants constants)
            idx = tile * BLOCK + offs
            m = idx < V
            r = _residual_tile(resid_row, row, idx, m, fresh, floor, row_max, inv_t, row_sum)
            if HAS_DRAFT:
                d = tl.load(draft_row + idx, mask=m, other=0.0).to(r.dtype)
            else:
                d = (idx == x).to(r.dtype)
            tl.store(resid_row + idx, tl.maximum(r - d, 0.0) / total, mask=m)
    tl.debug_barrier()                                # the next sibling's scalar read sees every lane's store
    return fresh & (total <= 0)


@triton.jit
def _floor(floor_ptr, slot, CUT: tl.constexpr):
    """Row ``slot``'s top-k/top-p cut (float64; ``-inf`` without ``CUT``: every entry kept)."""
    floor = tl.full([], float("-inf"), tl.float64)
    if CUT:
        floor = tl.load(floor_ptr + slot).to(tl.float64)
    return floor


@triton.jit
def _row_stats(row, floor, inv_t, V, BLOCK: tl.constexpr, TILES: tl.constexpr):
    """One read of a row's logits ``row`` (float64, through its cut ``floor``): ``(max,
    Σ exp((z − max)/T), first argmax)``, the sum rescaled as the maximum grows tile by tile."""
    offs = tl.arange(0, BLOCK)
    row_max = tl.full([], float("-inf"), tl.float64)
    row_sum = tl.zeros([], tl.float64)
    arg = tl.zeros([], tl.int64)
    for tile in range(0, TILES):  # a constexpr trip count (the interpreter's range wants constants)
        idx = tile * BLOCK + offs
        z = tl.load(row + idx, mask=idx < V, other=float("-inf")).to(tl.float64)
        z = tl.where(z >= floor, z, float("-inf"))
        tile_max = tl.max(z, axis=0)
        new_max = tl.maximum(row_max, tile_max)
        grown = tl.where(row_max == float("-inf"), 0.0, tl.exp((row_max - new_max) * inv_t))
        row_sum = row_sum * grown + tl.sum(tl.where(z == float("-inf"), 0.0, tl.exp((z - new_max) * inv_t)), axis=0)
        if tile_max > row_max:  # a later tile must be strictly larger: the first maximum's id is kept
            arg = (tile * BLOCK + tl.argmax(z, axis=0)).to(tl.int64)
        row_max = new_max
    return row_max, row_sum, arg


@triton.jit
def _target(z, floor, row_max, inv_t, row_sum):
    """§2's target probability of logits ``z`` (float64) in a row with these statistics, ``0``
    below the row's cut ``floor``."""
    return tl.where(z >= floor, tl.exp((z - row_max) * inv_t) / row_sum, 0.0)


@triton.jit
def _copy_target(resid_row, row, floor, row_max, inv_t, row_sum, V, BLOCK: tl.constexpr, TILES: tl.constexpr):
    """``r ← t``: the row's target probabilities (from its logits ``row``) into the scratch row."""
    offs = tl.arange(0, BLOCK)
    tl.debug_barrier()                                # the last reads of the scratch row are done
    for tile in range(0, TILES):  # a constexpr trip count (the interpreter's range wants constants)
        idx = tile * BLOCK + offs
        z = tl.load(row + idx, mask=idx < V, other=float("-inf")).to(tl.float64)
        tl.store(resid_row + idx, _target(z, floor, row_max, inv_t, row_sum), mask=idx < V)
    tl.debug_barrier()                                # every lane's copy is visible to the scalar reads after


@triton.jit
def tree_walk(logits_ptr, floor_ptr, temp_ptr, draft_ptr, ids_ptr, first_child_ptr, next_sibling_ptr, node_row_ptr,
              node_start_ptr, root_row_ptr, u_ptr, e_ptr, resid_ptr, tok_ptr, nodes_ptr, acc_ptr, V, D,
              threshold_single, threshold_acc, HAS_DRAFT: tl.constexpr, SGLANG: tl.constexpr, CUT: tl.constexpr,
              BLOCK: tl.constexpr, TILES: tl.constexpr):
    """One request's tree step. ``logits [R, V]`` (R = N + B slots; any float dtype, read in
    float64), their cut ``floor [R]`` (with ``CUT``), ``temperature [B]`` float64 (0: greedy),
    ``draft [N, V]``, ``ids/next_sibling/node_row/node_start [N]``, ``first_child [R]``,
    ``root_row [B]``, ``u [N]``, ``e [B, V]``, scratch ``resid [B, V]`` f64; out ``tok [B, D + 1]``,
    ``nodes [B, D]`` (pre-filled with -1), ``acc [B]``. Only the rows the walk visits are read: each
    once for its statistics (``_row_stats``), its target probabilities made where they are read
    (``_target``); no ``[R, V]`` row of them is ever written."""
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    slot = tl.load(root_row_ptr + b)
    T = tl.load(temp_ptr + b)
    greedy = T == 0
    inv_t = tl.where(greedy, 1.0, 1.0 / tl.where(greedy, 1.0, T))
    resid_row = resid_ptr + b * V
    depth = 0
    live = 1
    fresh = greedy == 0                               # set per level below; defined here for after the walk
    floor = _floor(floor_ptr, slot, CUT)
    row_max, row_sum, best = _row_stats(logits_ptr + slot * V, floor, inv_t, V, BLOCK, TILES)
    while live == 1:
        row = logits_ptr + slot * V
        fresh = greedy == 0                           # the residual is this row's target until a rejection
        sibling = tl.load(first_child_ptr + slot)
        coin = tl.load(u_ptr + tl.maximum(sibling, 0))  # sglang: the level's coin is its first child's
        running = coin * 0.0
        chosen = sibling * 0 - 1
        chosen_token = chosen
        while (sibling >= 0) & (chosen < 0):
            x = tl.load(ids_ptr + sibling)
            real = x >= 0
            xs = tl.maximum(x, 0)
            if greedy:
                accept = real & (x == best)
            elif SGLANG:
                t_x = tl.where(real, _target(tl.load(row + xs).to(tl.float64), floor, row_max, inv_t, row_sum), 0.0)
                running += t_x
                accept = real & (t_x > 0) & ((t_x >= threshold_single) | (coin * threshold_acc < running))
                if real & (accept == 0):
                    if fresh:
                        _copy_target(resid_row, row, floor, row_max, inv_t, row_sum, V, BLOCK, TILES)
                        fresh = greedy != greedy      # False, as a tensor: loop-carried types must not change
                    tl.store(resid_row + xs, 0.0)
                    tl.debug_barrier()
            else:
                if fresh:
                    r_x = _target(tl.load(row + xs).to(tl.float64), floor, row_max, inv_t, row_sum)
                else:
                    r_x = tl.load(resid_row + xs)
                if HAS_DRAFT:
                    d_x = tl.load(draft_ptr + sibling * V + xs).to(r_x.dtype)
                else:
                    d_x = r_x * 0.0 + 1.0
                u = tl.load(u_ptr + sibling)
                accept = real & (r_x > 0) & (d_x > 0) & (u < r_x / tl.where(d_x > 0, d_x, 1.0))
                if real & (accept == 0):
                    fresh = _residual_update(resid_row, draft_ptr + sibling * V, xs, V, fresh, row, floor, row_max,
                                             inv_t, row_sum, HAS_DRAFT, BLOCK, TILES)
            if accept:
                chosen = sibling
                chosen_token = x
            else:
                sibling = tl.load(next_sibling_ptr + sibling)
        if chosen >= 0:
            tl.store(nodes_ptr + b * D + depth, chosen - tl.load(node_start_ptr + chosen))
            tl.store(tok_ptr + b * (D + 1) + depth, chosen_token)
            depth += 1
            slot = tl.load(node_row_ptr + chosen)
            floor = _floor(floor_ptr, slot, CUT)
            row_max, row_sum, best = _row_stats(logits_ptr + slot * V, floor, inv_t, V, BLOCK, TILES)
        else:
            live = 0
    token = best
    tl.debug_barrier()
    if greedy == 0:                                   # the race over the residual (empty: the row itself)
        row = logits_ptr + slot * V
        if fresh == 0:
            total = row_max.to(tl.float64) * 0.0
            for tile in range(0, TILES):  # a constexpr trip count (the interpreter's range wants constants)
                idx = tile * BLOCK + offs
                total += tl.sum(tl.load(resid_row + idx, mask=idx < V, other=0.0), axis=0)
            fresh = total <= 0                        # an emptied residual: the row's own target
        best_score = row_max.to(tl.float64) * 0.0 - 1.0
        for tile in range(0, TILES):  # a constexpr trip count (the interpreter's range wants constants)
            start = tile * BLOCK
            idx = start + offs
            m = idx < V
            w = _residual_tile(resid_row, row, idx, m, fresh, floor, row_max, inv_t, row_sum)
            e = tl.load(e_ptr + b * V + idx, mask=m, other=1.0).to(w.dtype)
            score = tl.where(m & (w > 0), w / e, -1.0)
            tile_best = tl.max(score, axis=0)
            if tile_best > best_score:
                best_score = tile_best
                token = (start + tl.argmax(score, axis=0)).to(tl.int64)
    tl.store(tok_ptr + b * (D + 1) + depth, token)
    tl.store(acc_ptr + b, depth)


def tree_call(kernels, batch, noise, depths, device: str, block: int = BLOCK, *, cut=None, logits=None,
              num_warps: int = WARPS):
    """A validated ``TreeBatch`` made ready for the kernel, on ``device``: its logits (read through
    ``cut`` ``[R]`` where given: the rows' top-k/top-p/min_p floors, ``triton_device.filter_cuts``),
    the noise and the tree's links. ``logits``: the batch's target logits already on ``device``
    (None: copied here, in their own dtype). ``block``, ``num_warps``: the walk's vocabulary tile and
    warps (one program a request walks: a wide tile and many warps keep its reads in flight).

    Returns ``(launch, (tok [B, D + 1], acc [B], nodes [B, max(D, 1)]))``: ``launch()`` runs
    ``tree_walk`` once into those output tensors (``specsim.bench.trees --kernel`` times it alone).
    """
    import torch

    from devices import torch_philox
    from devices.torch_tree import tree_links
    from devices.triton_host import to_torch

    on = lambda a, dt: torch.as_tensor(np.ascontiguousarray(np.asarray(a, dt)), device=device)  # noqa: E731
    B, V = batch.batch_size, batch.vocab_size
    N = int(np.sum(batch.num_nodes))
    num_nodes, temperature = on(batch.num_nodes, np.int64), on(batch.temperature, np.float64)
    logits = to_torch(batch.target_logits, device) if logits is None else logits
    if noise is not None:
        u, e = on(noise.uniforms, np.float64), on(noise.exponentials, np.float64)
    elif (np.asarray(batch.temperature) > 0).any():
        u, e = torch_philox.step_noise(on(np.asarray(batch.seeds).astype(np.uint64).view(np.int64), np.int64),
                                       on(batch.positions, np.int64), num_nodes, V, N, int(np.max(batch.num_nodes)))
    else:
        u, e = torch.zeros(N, dtype=torch.float64, device=device), torch.ones(B, V, dtype=torch.float64, device=device)
    links = tree_links(np.asarray(batch.num_nodes), np.asarray(batch.parents), depths, device)
    D = links.max_depth
    pad = lambda t, fill=0: t if t.numel() else torch.full((1,), fill, dtype=t.dtype, device=device)  # noqa: E731
    draft = None if batch.draft_probs is None else on(batch.draft_probs, batch.draft_probs.dtype)
    tok = torch.full((B, D + 1), -1, dtype=torch.int64, device=device)
    nodes = torch.full((B, max(D, 1)), -1, dtype=torch.int64, device=device)
    acc = torch.zeros(B, dtype=torch.int64, device=device)
    resid = torch.empty((B, V), dtype=torch.float64, device=device)
    root = torch.cumsum(num_nodes, 0) - num_nodes + torch.arange(B, device=device)
    BLOCK = min(block, triton.next_power_of_2(V))
    args = (logits, logits if cut is None else cut, temperature,
            pad(draft.reshape(-1) if draft is not None else torch.zeros(0, dtype=torch.float64, device=device)),
            pad(on(batch.draft_token_ids, np.int64)), links.first_child, pad(links.next_sibling, -1),
            pad(links.node_row), pad(links.node_start), root, pad(u.contiguous()), e.contiguous(), resid, tok, nodes,
            acc, V, D, float(batch.threshold_single), float(batch.threshold_acc))
    meta = dict(HAS_DRAFT=draft is not None, SGLANG=batch.scheme == "sglang", CUT=cut is not None, BLOCK=BLOCK,
                TILES=triton.cdiv(V, BLOCK), num_warps=num_warps)
    return (lambda: kernels.tree_walk[(B,)](*args, **meta)), (tok, acc, nodes)


def verify_tree_triton(kernels, batch, noise, depths, device: str, block: int = BLOCK, *, cut=None, logits=None):
    """A validated ``TreeBatch`` through the kernel (``kernels``: this module, compiled or interpreted;
    ``cut``, ``logits``: ``tree_call``'s).

    Returns numpy ``(output_token_ids [B, D + 1], num_accepted [B], accepted_nodes [B, D])``.
    """
    launch, (tok, acc, nodes) = tree_call(kernels, batch, noise, depths, device, block, cut=cut, logits=logits)
    launch()
    D = tok.shape[1] - 1
    return tok.cpu().numpy(), acc.cpu().numpy(), nodes[:, :D].cpu().numpy()


__all__ = ["BLOCK", "WARPS", "tree_call", "tree_walk", "verify_tree_triton"]
