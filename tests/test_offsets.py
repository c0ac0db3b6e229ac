"""L1-offsets: calls whose rows cross an element boundary, judged past it.

The group's code runs here at 2^16 and 2^17 elements (V = 1000), where a call is a few hundred kB: a correct
device passes with injected noise and as a black box, and a device whose row offsets wrap at 2^16 elements
(reading the wrong memory past it, as int32 offsets do past 2^31) fails every crossing in both modes. At the
real boundaries the calls need GiBs: each check is then ``not_supported`` with its cause, and the verdict's
scope names the boundaries left unchecked.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from devices.protocol import Capabilities
from devices.registry import load
from specsim.conformance.checks.chain.offsets import (BOUNDARIES, FOLLOW, Crossing, build, crossing_checks,
                                                     crossings, offsets_group)
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.context import (CALL_BYTES_ENV, DEFAULT_CALL_BYTES, Context, InvalidSize,
                                              parse_bytes)

SMALL = (2**16, 2**17)
V = 1000


class WrappingOffsets:
    """A device whose row offsets wrap at ``2**bits`` elements: a row that ends past it is read as the row
    holding element ``r·V mod 2**bits``, in ``target_logits`` and in ``draft_probs`` (whole rows, so that its
    input checks still pass: the wrong row, not a malformed one)."""

    def __init__(self, inner, bits: int = 16):
        self.inner, self.bits = inner, bits
        self.name = f"{inner.name} (offsets wrap at 2^{bits})"
        self.capabilities = inner.capabilities

    def _wrapped(self, rows):
        if rows is None:
            return None
        rows = np.array(rows)
        width = rows.shape[1]
        past = np.flatnonzero(np.arange(rows.shape[0]) * width + width > 2**self.bits)
        rows[past] = rows[(past * width % 2**self.bits) // width]
        return rows

    def verify(self, batch, noise=None):
        return self.inner.verify(dataclasses.replace(batch, target_logits=self._wrapped(batch.target_logits),
                                                     draft_probs=self._wrapped(batch.draft_probs)), noise)


@pytest.fixture(scope="module")
def torch_device():
    return load("torch")


@pytest.mark.parametrize("black_box", [False, True], ids=["injected", "black-box"])
def test_a_correct_device_passes_past_the_boundary(torch_device, black_box):
    device = BlackBox(torch_device) if black_box else torch_device
    for seed in (0, 1)[: 1 if black_box else 2]:
        results = crossing_checks(device, seed, DEFAULT_CALL_BYTES, SMALL, V)
        assert [r.name.split("/")[-1] for r in results] == ["target-rows-2^16", "draft-rows-2^16",
                                                            "target-rows-2^17", "draft-rows-2^17"]
        assert all(r.status == "pass" for r in results), [(r.name, r.detail) for r in results if r.status != "pass"]
        mode = "device-rng" if black_box else "injected"
        assert all(r.name.startswith(f"L1/offsets/{mode}/") for r in results)


@pytest.mark.parametrize("black_box", [False, True], ids=["injected", "black-box"])
def test_offsets_that_wrap_fail_every_crossing(torch_device, black_box):
    device = WrappingOffsets(torch_device)
    device = BlackBox(device) if black_box else device
    results = crossing_checks(device, 0, DEFAULT_CALL_BYTES, SMALL, V)
    assert [r.status for r in results] == ["fail"] * 4, [(r.name, r.status, r.detail) for r in results]
    assert "request i below is request" in results[0].detail


def test_draft_rows_alone_read_from_the_wrong_place_fail_with_injected_noise(torch_device):
    """Only the draft rows wrap: the steered requests accept their first draft under the reference and reject
    it on the wrong row. (As a black box, a draft row's value moves the law, not its support: L3's business.)"""
    class DraftRowsWrap(WrappingOffsets):
        def verify(self, batch, noise=None):
            return self.inner.verify(dataclasses.replace(batch, draft_probs=self._wrapped(batch.draft_probs)), noise)
    results = crossing_checks(DraftRowsWrap(torch_device), 0, DEFAULT_CALL_BYTES, SMALL, V)
    assert [r.status for r in results] == ["pass", "fail", "pass", "fail"]


def test_the_judged_requests_straddle_and_follow_the_boundary():
    caps = Capabilities(injected_noise=True, rng="none", max_vocab_size=2**20, dtypes=("float16", "float32"))
    for c in crossings(caps, SMALL, V):
        lay = c.layout()
        rows = c.rows_per_request
        first = lay.bulk * rows * V                  # the straddling request's first element in its index space
        assert first < c.elements < first + rows * V, c.name
        assert lay.judged == FOLLOW + 1
        batch, noise = build(c, 3)
        assert batch.target_logits.dtype == np.float16    # the narrowest declared dtype: the bulk halves
        sent = batch.target_logits.nbytes + (0 if batch.draft_probs is None else batch.draft_probs.nbytes) \
            + noise.exponentials.nbytes
        assert sent == c.call_bytes()
        space = batch.target_logits if c.space == "target-rows" else batch.draft_probs
        if space is not None:
            assert space.size > c.elements
        bulk = np.asarray(batch.target_logits[: lay.bulk * (c.k + 1)], np.float64)
        assert (bulk[:, 0] == 0).all() and np.isinf(bulk[:, 1:]).all()
        judged = np.asarray(batch.target_logits[lay.bulk * (c.k + 1):], np.float64)
        assert np.isinf(judged[:, 0]).all()          # id 0, the bulk's one token, is never allowed past the boundary


def test_draft_rows_carry_draft_probs_where_declared():
    point_only = Capabilities(injected_noise=True, rng="none", max_vocab_size=2**20, draft_probs=False)
    both = Capabilities(injected_noise=True, rng="none", max_vocab_size=2**20)
    assert not any(c.draft_probs for c in crossings(point_only, SMALL, V))
    assert [c.draft_probs for c in crossings(both, SMALL, V)] == [False, True, False, True]


def test_a_call_past_the_budget_is_not_supported_with_its_cause(torch_device):
    results = offsets_group(torch_device, Context())
    assert [r.status for r in results] == ["not_supported"] * 4
    first = results[0]
    assert first.name == "L1/offsets/injected/target-rows-2^31"
    assert "crossing 2^31 elements" in first.detail and "GiB in one call" in first.detail
    assert "this run allows 1.0 GiB per call: --call-bytes" in first.detail
    assert first.extra["unchecked"]["elements"] == BOUNDARIES[0]
    assert first.extra["unchecked"]["bytes"] > DEFAULT_CALL_BYTES


def test_the_verdict_scope_names_the_unchecked_boundaries(torch_device):
    from reports.tables import scope_rows
    from specsim.conformance.run.runner import run_conformance, verdict_of
    ctx = Context()
    results = run_conformance(torch_device, ctx, ["L1-offsets"])
    doc = {"verdict": verdict_of(torch_device, results, ctx, ["L1-offsets"]), "checks": [r.to_json() for r in results]}
    offsets = doc["verdict"]["scope"]["offsets"]
    assert offsets["checked"] == [] and len(offsets["unchecked"]) == 4
    row = dict((a, b) for a, b in scope_rows(doc))["offsets not checked"]
    assert row.startswith("target-rows 2^31, draft-rows 2^31, target-rows 2^32, draft-rows 2^32")
    assert "--call-bytes" in row


def test_call_bytes_sizes_and_environment(monkeypatch):
    assert parse_bytes("40GiB") == 40 << 30 and parse_bytes("512 MiB") == 512 << 20 and parse_bytes("7") == 7
    for bad in ("", "lots", "1 parsec", "0"):
        with pytest.raises(InvalidSize, match="--call-bytes"):
            parse_bytes(bad)
    monkeypatch.delenv(CALL_BYTES_ENV, raising=False)
    assert Context().call_bytes == DEFAULT_CALL_BYTES
    monkeypatch.setenv(CALL_BYTES_ENV, "6GiB")
    assert Context().call_bytes == 6 << 30


def test_conform_refuses_a_bad_size(capsys):
    from specsim.cli import main
    assert main(["conform", "--device", "torch", "--groups", "L1-offsets", "--call-bytes", "lots"]) == 2
    assert "--call-bytes" in capsys.readouterr().err


def test_a_resumed_run_keeps_its_budget():
    from specsim.conformance.run.isolation import Plan
    one = Plan("torch", 0, 1e-3, False, ["L1-offsets"], call_bytes=1 << 30)
    other = dataclasses.replace(one, call_bytes=40 << 30)
    assert one.key()["call_bytes"] == 1 << 30 and one.key() != other.key()


def test_crossing_names():
    c = Crossing(2**31, "draft-rows", 128_256, 8, "float16", True, "injected")
    assert c.name == "L1/offsets/injected/draft-rows-2^31"
    assert dataclasses.replace(c, elements=3 * 2**20).name == "L1/offsets/injected/draft-rows-3145728"
