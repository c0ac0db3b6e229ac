"""``specsim field``: failing checks sorted into the shipped deviations, confirmed where an experiment exists,
NEW otherwise; the table renders and merges runs from several machines."""

from __future__ import annotations

import doctest
import json

from specsim import field
from specsim.commands import field as field_command


def _checks():
    return {"L1-edges": [{"name": "L1/edge/u0-masked-point", "status": "fail", "detail": "expected [[0]]"},
                         {"name": "L1/edge/k0", "status": "pass"}],
            "L2-rng": [{"name": "L2/brand-new-check", "status": "fail", "detail": "something else", "seed": 5}]}


def test_failures_are_sorted_into_shipped_deviations_or_new():
    waivers = field.field_waivers("vllm")
    findings = field.classify("vllm", _checks(), waivers)
    by_check = {f.check: f for f in findings}
    assert by_check["L1/edge/u0-masked-point"].deviation == "inclusive-acceptance"
    assert by_check["L1/edge/u0-masked-point"].judgement == "loss of losslessness"
    assert by_check["L2/brand-new-check"].deviation == "NEW"
    assert "--groups L2-rng" in by_check["L2/brand-new-check"].reproduction(quick=True)


def test_table_renders_and_merges_machines(tmp_path):
    waivers = field.field_waivers("vllm")
    findings = field.classify("vllm", _checks(), waivers)
    gpu = {"devices": [field.device_entry("vllm", _checks(), None, "vllm 0.33.0", False, "H100", "specsim field ...",
                                          findings, waivers)]}
    cpu = {"devices": [field.device_entry("vllm", None, "no CUDA GPU here", "", True, "CPU", "", [], [])]}
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    (tmp_path / "cpu.json").write_text(json.dumps(cpu))
    doc = field.merge([gpu, cpu])                       # a run beats 'not available', whatever the order
    assert doc["devices"][0]["available"]
    text = field.render(doc)
    assert "| L1-edges | pass (1 waived) |" in text and "| L2-rng | FAIL (1 new) |" in text
    assert "### `inclusive-acceptance` on `vllm` — loss of losslessness" in text

    class Args:
        out, merge, render_only, extra = str(tmp_path / "out"), [str(tmp_path / "cpu.json"),
                                                                  str(tmp_path / "gpu.json")], True, []
    assert field_command.run(Args) == 1                 # a NEW deviation: exit 1
    assert (tmp_path / "out" / "field.md").read_text() == text


def test_docstring_examples_run():
    assert doctest.testmod(field).failed == 0


def test_adapter_helpers_and_why_not_messages():
    from devices.field import flashinfer_device, sglang_device
    assert doctest.testmod(flashinfer_device).failed == 0 and doctest.testmod(field_command).failed == 0
    try:
        sglang_device.make_device()
    except ImportError as e:
        assert "371 MB" in str(e) or "no adapter" in str(e)


def test_an_unconfirmed_deviation_is_new_and_rows_are_zeroed_on_the_device_side(monkeypatch):
    import numpy as np

    from specsim.testing.bad_inputs import good_batch
    f = field.Finding("vllm", "L1/volume", "fail", 0, "", deviation="placeholder-row-read")
    monkeypatch.setitem(field.CONFIRM, "placeholder-row-read", lambda device, check, quick: "NOT confirmed: x")
    field.confirm([f], None, quick=True)
    assert f.deviation == "NEW" and "did not confirm" in f.judgement

    seen = []

    class Recording:
        capabilities = None

        def verify(self, batch, noise=None):
            seen.append(batch.draft_probs)

    batch, noise = good_batch()
    batch = field.dataclasses.replace(batch, draft_token_ids=np.array([3, -1]))
    field.PlaceholderRowsZeroed(Recording()).verify(batch, noise)
    assert seen[0][1].tolist() == [0, 0, 0, 0] and seen[0][0].tolist() == batch.draft_probs[0].tolist()


def test_runs_of_one_machine_unite_group_by_group():
    def run(groups, command):
        checks = {g: _checks()[g] for g in groups}
        findings = field.classify("vllm", checks, field.field_waivers("vllm"))
        return {"devices": [field.device_entry("vllm", checks, None, "vllm 0.33.0", False, "H100", command,
                                               findings, field.field_waivers("vllm"))]}
    doc = field.merge([run(["L1-edges"], "a"), run(["L2-rng"], "b")])
    (e,) = doc["devices"]
    assert sorted(e["groups"]) == ["L1-edges", "L2-rng"] and e["command"] == "a; b"
    assert sorted(f["check"] for f in e["findings"]) == ["L1/edge/u0-masked-point", "L2/brand-new-check"]


def test_rewaive_sorts_stored_findings_by_todays_waiver_files():
    checks = {"L1-edges": [{"name": "L1/edge/u0-masked-point", "status": "fail", "detail": "x"}]}
    stored = [field.Finding("vllm", "L1/edge/u0-masked-point", "fail", None, "x", group="L1-edges")]
    doc = {"devices": [field.device_entry("vllm", checks, None, "vllm 0.33.0", False, "H100", "c", stored, [])],
           "extras": {}}
    assert doc["devices"][0]["groups"]["L1-edges"]["waived"] == 0
    (e,) = field.rewaive(doc)["devices"]
    assert e["findings"][0]["deviation"] == "inclusive-acceptance" and e["groups"]["L1-edges"]["waived"] == 1


def test_flashinfers_shipped_waivers_carry_a_reason_link_deviation_and_judgement():
    from property_tests.waivers import JUDGEMENTS
    waivers = field.field_waivers("flashinfer")
    assert {w.deviation for w in waivers} == {"draft-prob-zero-accepted", "rng-keyed-by-batch-row"}
    for w in waivers:
        assert w.reason and w.issue.startswith("https://github.com/flashinfer-ai/flashinfer/blob/v0.7.2.post1/")
        assert w.judgement in JUDGEMENTS and tuple(w.devices) == ("flashinfer",), w


def test_transformers_shipped_waivers_cover_exactly_its_edge_findings():
    """Each edge finding on transformers 5.23.0 (tests/field/test_hf_transformers.py's SEEDED_EDGE_FINDINGS,
    checked there against a live run) is a judged deviation; the edges it passes are waived by nothing."""
    from property_tests.waivers import JUDGEMENTS
    from specsim.testing.edges import EDGES
    waivers = field.field_waivers("transformers")
    findings = {"L1/edge/draft-prob-zero": "draft-prob-zero-accepted", "L1/edge/placeholder-full": "placeholder-not-an-input",
                "L1/edge/placeholder-point": "placeholder-not-an-input", "L1/edge/top-p-cut-ties": "filter-ties"}
    for e in EDGES:
        check = f"L1/edge/{e.name}"
        matched = [w.deviation for w in waivers if w.matches_check(check)]
        assert matched == ([findings[check]] if check in findings else []), (check, matched)
    for w in waivers:
        assert w.reason and w.issue.startswith("https://github.com/huggingface/transformers/blob/v5.23.0/")
        assert w.judgement in JUDGEMENTS and tuple(w.devices) == ("transformers",), w
