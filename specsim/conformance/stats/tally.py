"""A case's trials counted: what a device emitted, as integer counts that merge exactly by addition.

``Tally`` holds one case's counts (tokens per request and position, accepted lengths, exact-rule
violations); ``tally_chunk`` adds one call's output to it. Shards of a case (``shards``) each return a
``Tally``; ``Tally.merged`` sums them in shard order, so the verdict (``verdicts``) is the same
whatever ran the shards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID
from specsim.conformance.cases.chain import Built


@dataclass
class Tally:
    """What trials of one case produced: integer counts only, so shards merge by addition.

    - ``counts``: (i, j) -> ``[V]`` int64, the token request i emitted at position j;
    - ``accepted``: i -> ``[K_i + 1]`` int64, its ``num_accepted``;
    - ``violations``: (i, what) -> int, trials breaking an exact rule (no α);
    - ``examples``: (i, what) -> str, one instance, from the lowest shard that saw one;
    - ``n``: trials.

    >>> a, b = Tally(n=2), Tally(n=3)
    >>> a.violations[(0, "pos0: tokens outside [0, V)")] = 1; a.examples[(0, "pos0: tokens outside [0, V)")] = "[9]"
    >>> merged = Tally.merged([a, b]); merged.n, merged.describe(0)
    (5, ['pos0: tokens outside [0, V): 1 trials (e.g. [9])'])
    """

    counts: dict = field(default_factory=dict)
    accepted: dict = field(default_factory=dict)
    violations: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    n: int = 0

    def add(self, other: "Tally") -> None:
        """Add ``other``'s counts to these (``other`` from a later shard: examples already here are kept)."""
        for key, c in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + c
        for key, c in other.accepted.items():
            self.accepted[key] = self.accepted.get(key, 0) + c
        for key, c in other.violations.items():
            self.violations[key] = self.violations.get(key, 0) + c
            self.examples.setdefault(key, other.examples.get(key, ""))
        self.n += other.n

    @classmethod
    def merged(cls, tallies) -> "Tally":
        """The exact sum of shard tallies given in shard-index order."""
        out = cls()
        for t in tallies:
            out.add(t)
        return out

    def violate(self, i: int, what: str, trials: int, example: str) -> None:
        self.violations[(i, what)] = self.violations.get((i, what), 0) + int(trials)
        self.examples.setdefault((i, what), example)

    def describe(self, i: int) -> list[str]:
        """Request i's exact-rule violations, one line each."""
        return [f"{what}: {c} trials (e.g. {self.examples.get((j, what), '')})"
                for (j, what), c in self.violations.items() if j == i]

    def to_json(self) -> dict:
        """Sparse integer counts: ``{"counts": {"i,j": [[ids], [counts]]}, ...}``."""
        def sparse(c):
            c = np.asarray(c)
            nz = np.flatnonzero(c)
            return [int(c.size), nz.tolist(), c[nz].astype(np.int64).tolist()]
        return {"n": self.n,
                "counts": {f"{i},{j}": sparse(c) for (i, j), c in self.counts.items()},
                "accepted": {str(i): sparse(c) for i, c in self.accepted.items()},
                "violations": [[i, what, c, self.examples.get((i, what), "")]
                               for (i, what), c in self.violations.items()]}

    @classmethod
    def from_json(cls, doc: dict) -> "Tally":
        def dense(v):
            out = np.zeros(v[0], np.int64)
            out[np.asarray(v[1], np.int64)] = v[2]
            return out
        t = cls(n=int(doc["n"]))
        t.counts = {tuple(int(x) for x in k.split(",")): dense(v) for k, v in doc["counts"].items()}
        t.accepted = {int(k): dense(v) for k, v in doc["accepted"].items()}
        for i, what, c, example in doc["violations"]:
            t.violations[(int(i), what)] = int(c)
            t.examples[(int(i), what)] = example
        return t


def tally_chunk(t: Tally, built: Built, drafts: list, out, n: int) -> None:
    """Count ``n`` trials' output ``out`` into ``t``: each emitted token by (request, position), each
    ``num_accepted``, and every trial breaking an exact rule (shape, range, accepted = drafts, padding,
    the greedy path) as a violation with one example. ``drafts``: per request ``[n, K_i]`` draft ids."""
    B = len(built.num_draft_tokens)
    V = built.target_logits.shape[1]
    width = int(built.num_draft_tokens.max()) + 1
    ids, acc = np.asarray(out.output_token_ids), np.asarray(out.num_accepted)
    if ids.ndim != 2 or ids.shape[0] != n * B or acc.shape != (n * B,):  # malformed: a violation, not a crash
        for i in range(B):
            t.violate(i, "output shape", n, f"output_token_ids {ids.shape}, num_accepted {acc.shape}; "
                                            f"expected ({n * B}, {width}) and ({n * B},) (SPEC §7)")
        return
    ids, acc = ids.reshape(n, B, -1), acc.reshape(n, B)
    for i, r in enumerate(built.case.requests):
        m = acc[:, i]
        if ids.shape[2] != width:
            t.violate(i, "output width", n, f"{ids.shape[2]}, expected {width}")
            continue
        outside = (m < 0) | (m > r.k)
        if outside.any():
            t.violate(i, f"num_accepted outside 0..{r.k}", int(outside.sum()), str(sorted(set(m[outside].tolist()))[:5]))
            m = np.clip(m, 0, r.k)
        d = drafts[i]
        row_ids = ids[:, i, :]
        pad = ((np.arange(width)[None, :] > m[:, None]) & (row_ids != PLACEHOLDER_TOKEN_ID)).any(axis=1)
        if pad.any():
            t.violate(i, "tokens after the last emitted one", int(pad.sum()), str(row_ids[np.argmax(pad)].tolist()))
        for j in range(r.k + 1):
            emitted = m >= j
            tok = row_ids[emitted, j]
            if j < r.k:
                acc_here = m > j
                wrong = row_ids[acc_here, j] != d[acc_here, j]
                if wrong.any():
                    first = int(np.argmax(wrong))
                    t.violate(i, f"pos{j}: accepted tokens differ from the draft", int(wrong.sum()),
                              f"emitted {int(row_ids[acc_here, j][first])}, drafted {int(d[acc_here, j][first])}")
            out_of_range = (tok < 0) | (tok >= V)
            if out_of_range.any():
                t.violate(i, f"pos{j}: tokens outside [0, V)", int(out_of_range.sum()),
                          str(np.unique(tok[out_of_range])[:5].tolist()))
                tok = tok[~out_of_range]
            if r.temperature == 0:
                continue
            t.counts[(i, j)] = t.counts.get((i, j), 0) + np.bincount(tok, minlength=V)
        if r.temperature == 0:  # the deterministic greedy path from the drafts
            logits = built.target_logits[[built.target_row(i, j) for j in range(r.k + 1)]]
            best = np.argmax(logits, axis=1)
            match = d == best[None, :r.k] if r.k else np.zeros((n, 0), bool)
            expect_m = np.where(match.all(axis=1), r.k, np.argmin(match, axis=1)) if r.k else np.zeros(n, np.int64)
            wrong = (m != expect_m) | (row_ids[np.arange(n), expect_m] != best[expect_m])
            if wrong.any():
                first = int(np.flatnonzero(wrong)[0])
                t.violate(i, "greedy: trials off the argmax path", int(wrong.sum()),
                          f"accepted {int(m[first])}, expected {int(expect_m[first])}, "
                          f"emitted {row_ids[first].tolist()}, argmax {best.tolist()}")
        if r.k:
            t.accepted[i] = t.accepted.get(i, 0) + np.bincount(m, minlength=r.k + 1)[: r.k + 1]
