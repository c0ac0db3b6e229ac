"""Paged KV cache: a block pool and the token each slot holds.

The toy target reads its context *from the cache* (``read``), not from the
request's token list, so a bookkeeping bug — a wrong block table, a slot
written past ``max_model_len``, stale KV after preemption — changes the
target's logits and is caught by the greedy-equality property.

>>> pool = BlockPool(num_blocks=4, block_size=2)
>>> blocks = pool.allocate(3)
>>> pool.num_free, sorted(blocks)
(1, [0, 1, 2])
>>> pool.free(blocks); pool.num_free
4
"""

from __future__ import annotations

import numpy as np


class KVError(RuntimeError):
    """A pool invariant was broken: double free, foreign block, slot outside the table."""


class BlockPool:
    """``num_blocks`` blocks of ``block_size`` slots; slot ``b·block_size + o`` holds one token."""

    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"num_blocks and block_size: must be >= 1, got {num_blocks}, {block_size}")
        self.num_blocks, self.block_size = num_blocks, block_size
        self._free = list(range(num_blocks - 1, -1, -1))  # pop() hands out low ids first
        self._owned = np.zeros(num_blocks, bool)
        self.tokens = np.full(num_blocks * block_size, -1, np.int64)  # [num_blocks * block_size]

    @property
    def num_free(self) -> int:
        return len(self._free)

    def blocks_for(self, num_slots: int) -> int:
        """Blocks needed to hold positions ``0 .. num_slots - 1``."""
        return -(-num_slots // self.block_size)

    def allocate(self, n: int) -> list[int]:
        if n > len(self._free):
            raise KVError(f"allocate: {n} blocks asked, {len(self._free)} free")
        out = [self._free.pop() for _ in range(n)]
        self._owned[out] = True
        return out

    def free(self, blocks: list[int]) -> None:
        for b in blocks:
            if not self._owned[b]:
                raise KVError(f"free: block {b} is not allocated (double free?)")
            self._owned[b] = False
            self.tokens[b * self.block_size:(b + 1) * self.block_size] = -1  # poison: stale reads show up
            self._free.append(b)

    def slots(self, block_table: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Slots ``[n]`` of ``positions`` ``[n]`` under ``block_table`` ``[num_blocks_of_request]``."""
        idx = positions // self.block_size
        if len(positions) and (positions.min() < 0 or idx.max() >= len(block_table)):
            raise KVError(f"slots: positions {positions.min()}..{positions.max()} outside a table of "
                          f"{len(block_table)} blocks")
        return block_table[idx] * self.block_size + positions % self.block_size

    def write(self, block_table: np.ndarray, positions: np.ndarray, tokens: np.ndarray) -> None:
        self.tokens[self.slots(block_table, positions)] = tokens

    def read(self, block_table: np.ndarray, positions: np.ndarray) -> np.ndarray:
        return self.tokens[self.slots(block_table, positions)]

    def check(self, tables: dict[str, list[int]]) -> None:
        """Every block is free xor owned by exactly one table; raises ``KVError`` otherwise."""
        owner: dict[int, str] = {}
        for rid, table in tables.items():
            for b in table:
                if b in owner:
                    raise KVError(f"block {b} held by both {owner[b]!r} and {rid!r}")
                owner[b] = rid
        free = set(self._free)
        if len(free) != len(self._free):
            raise KVError("free list holds a block twice")
        if free & owner.keys():
            raise KVError(f"blocks {sorted(free & owner.keys())} are both free and held")
        if len(free) + len(owner) != self.num_blocks:
            leaked = set(range(self.num_blocks)) - free - owner.keys()
            raise KVError(f"blocks {sorted(leaked)} leaked (neither free nor held)")
        if not all(self._owned[b] for b in owner) or any(self._owned[b] for b in free):
            raise KVError("ownership flags disagree with the free list")
