"""Fixture devices for the vendor-workflow tests: one good, and broken ones.

``GreedyDevice`` is a tiny numpy device that treats every request as greedy
(SPEC §3: accept a draft iff it is the target's argmax; emit the argmax at
the first rejection, or the bonus argmax). It is only as correct as the fake
groups in ``specsim_fakegroups`` need. Each broken device misbehaves in *one*
kind of call, keyed by the vocabulary size, so the other groups still run:

- ``make_aborting``: ``os.abort()`` (SIGABRT) when V == 13;
- ``make_hanging``: sleeps forever when V == 17 (unless ``FAKEDEV_NO_HANG=1``: the driver was fixed);
- ``make_hanging_with_helper``: the same, after starting a helper process (as a driver's daemon
  would) that sleeps and writes its pid to ``$FAKEDEV_HELPER_PIDFILE``;
- ``make_raising``: raises ``RuntimeError`` when V == 19;
- ``make_wrong_token``: emits argmax + 1 at the first rejection (every call).

Registered as ``"specsim_fakedev:make_aborting"`` etc. (this directory is on sys.path).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, Capabilities, Noise, VerifyBatch, VerifyOutput

ABORT_VOCAB, HANG_VOCAB, RAISE_VOCAB = 13, 17, 19


class GreedyDevice:
    name = "fake-greedy"
    # Declares SPEC §10's core profile so that a harness run of good fake groups gets a PASS or
    # PARTIAL verdict; only the fake groups (greedy calls, V < 64, K <= 4) ever call it.
    capabilities = Capabilities(injected_noise=True, rng="none", max_vocab_size=262_144, max_k=8)

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        self.misbehave(batch)
        cu = batch.request_offsets()
        out = np.full((batch.batch_size, batch.max_k + 1), PLACEHOLDER_TOKEN_ID, dtype=np.int64)
        num_accepted = np.zeros(batch.batch_size, dtype=np.int64)
        for i in range(batch.batch_size):
            k = int(batch.num_draft_tokens[i])
            rows = batch.target_logits[cu[i] + i: cu[i] + i + k + 1]  # [k + 1, V]; the last is the bonus row
            drafts = batch.draft_token_ids[cu[i]: cu[i] + k]  # [k]
            j = 0
            while j < k and int(drafts[j]) == int(np.argmax(rows[j])):
                out[i, j] = drafts[j]
                j += 1
            out[i, j] = self.emit(rows[j])
            num_accepted[i] = j
        return VerifyOutput(out, num_accepted)

    def misbehave(self, batch: VerifyBatch) -> None:
        pass

    def emit(self, row: np.ndarray) -> int:
        return int(np.argmax(row))


class AbortingDevice(GreedyDevice):
    name = "fake-aborting"

    def misbehave(self, batch):
        if batch.vocab_size == ABORT_VOCAB:
            os.abort()  # what a native kernel's failed assertion does


class HangingDevice(GreedyDevice):
    name = "fake-hanging"

    def misbehave(self, batch):
        if batch.vocab_size == HANG_VOCAB and os.environ.get("FAKEDEV_NO_HANG") != "1":
            while True:  # a deadlocked kernel
                time.sleep(0.05)


class HangingWithHelperDevice(HangingDevice):
    name = "fake-hanging-with-helper"

    def misbehave(self, batch):
        if batch.vocab_size == HANG_VOCAB and os.environ.get("FAKEDEV_NO_HANG") != "1":
            pidfile = os.environ.get("FAKEDEV_HELPER_PIDFILE", os.devnull)
            subprocess.Popen([sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid()));"
                              " time.sleep(600)", pidfile], stdin=subprocess.DEVNULL)
        super().misbehave(batch)


class RaisingDevice(GreedyDevice):
    name = "fake-raising"

    def misbehave(self, batch):
        if batch.vocab_size == RAISE_VOCAB:
            raise RuntimeError("fake device: driver returned status 700")


class WrongTokenDevice(GreedyDevice):
    name = "fake-wrong-token"

    def emit(self, row):
        return (int(np.argmax(row)) + 1) % row.shape[-1]


def make_good():
    return GreedyDevice()


def make_aborting():
    return AbortingDevice()


def make_hanging():
    return HangingDevice()


def make_hanging_with_helper():
    return HangingWithHelperDevice()


def make_raising():
    return RaisingDevice()


def make_wrong_token():
    return WrongTokenDevice()


def make_unloadable():
    raise OSError("libacme_npu.so: cannot open shared object file")


class WrongFirstTokenDevice:
    """Wraps a correct device (the reference-as-device) and bumps request 0's first emitted token."""

    def __init__(self, inner):
        self.inner = inner
        self.name = f"wrong-first-token({inner.name})"
        self.capabilities = inner.capabilities

    def verify(self, batch, noise=None):
        out = self.inner.verify(batch, noise)
        ids = out.output_token_ids.copy()
        if ids.size:
            ids[0, 0] = (ids[0, 0] + 1) % batch.vocab_size
        return VerifyOutput(ids, out.num_accepted)


def make_wrong_reference():
    from specsim.judge.reference_device import make_device
    return WrongFirstTokenDevice(make_device())


class AbortWhenDrawingDevice:
    """Wraps a real device; ``os.abort()`` the first time it must draw its own randomness (noise=None).

    Against the real groups this crashes the keyed, RNG and statistical groups and leaves the
    injected-noise, edge and input-rule groups to pass.
    """

    def __init__(self, inner):
        self.inner = inner
        self.name = f"abort-when-drawing({inner.name})"
        self.capabilities = inner.capabilities

    def verify(self, batch, noise=None):
        if noise is None:
            os.abort()
        return self.inner.verify(batch, noise)


def make_torch_aborting_when_drawing():
    from devices.registry import load
    return AbortWhenDrawingDevice(load("torch"))
