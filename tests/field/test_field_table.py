"""``specsim field``: failing checks sorted into the shipped deviations, confirmed where an experiment exists,
NEW otherwise; the table renders and merges runs from several machines."""

from __future__ import annotations

import doctest
import json

import pytest

from specsim.field import table as field
from specsim.commands import field as field_command


def _checks():
    return {"L1-edges": [{"name": "L1/edge/u0-masked-point", "status": "fail", "detail": "expected [[0]]"},
                         {"name": "L1/edge/k0", "status": "pass"}],
            "L2-rng": [{"name": "L2/brand-new-check", "status": "fail", "detail": "something else", "seed": 5}]}


def test_failures_are_sorted_into_shipped_deviations_or_new():
    waivers = field.field_waivers("vllm")
    findings = field.classify("vllm", _checks(), waivers, "vllm 0.33.0")
    by_check = {f.check: f for f in findings}
    assert by_check["L1/edge/u0-masked-point"].deviation == "inclusive-acceptance"
    assert by_check["L1/edge/u0-masked-point"].judgement == "loss of losslessness"
    assert by_check["L2/brand-new-check"].deviation == "NEW"
    assert "--groups L2-rng" in by_check["L2/brand-new-check"].reproduction(quick=True)


def test_table_renders_and_merges_machines(tmp_path):
    waivers = field.field_waivers("vllm")
    findings = field.classify("vllm", _checks(), waivers, "vllm 0.33.0")
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
        findings = field.classify("vllm", checks, field.field_waivers("vllm"), "vllm 0.33.0")
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
    from specsim.conformance.verdict.waivers import JUDGEMENTS
    waivers = field.field_waivers("flashinfer")
    assert {w.deviation for w in waivers} == {"draft-prob-zero-accepted", "rng-keyed-by-batch-row"}
    for w in waivers:
        assert w.reason and w.issue.startswith("https://github.com/flashinfer-ai/flashinfer/blob/v0.7.2.post1/")
        assert w.judgement in JUDGEMENTS and tuple(w.devices) == ("flashinfer",), w


def test_transformers_shipped_waivers_cover_exactly_its_edge_findings():
    """Each edge finding on transformers 5.23.0 (tests/field/test_hf_transformers.py's SEEDED_EDGE_FINDINGS,
    checked there against a live run) is a judged deviation; the edges it passes are waived by nothing."""
    from specsim.conformance.verdict.waivers import JUDGEMENTS
    from specsim.testing.edges import EDGES
    waivers = field.field_waivers("transformers")
    findings = {"L1/edge/draft-prob-zero": "draft-prob-zero-accepted", "L1/edge/placeholder-full": "placeholder-not-an-input",
                "L1/edge/placeholder-point": "placeholder-not-an-input", "L1/edge/top-p-cut-ties": "filter-ties",
                "L1/edge/empty-residual": "empty-residual-raises", "L1/edge/empty-residual-top-k": "empty-residual-raises",
                **{f"L1/edge/empty-residual-{e}": "draft-row-renormalised"
                   for e in ("temperature", "top-k-temperature", "top-p-temperature", "temperature-band",
                             "temperature-far")},
                "L1/edge/top-p-cut-ties-dyadic": "filter-ties"}
    for e in EDGES:
        check = f"L1/edge/{e.name}"
        matched = [w.deviation for w in waivers if w.matches_check(check)]
        assert matched == ([findings[check]] if check in findings else []), (check, matched)
    for w in waivers:
        assert w.reason and w.issue.startswith("https://github.com/huggingface/transformers/blob/v5.23.0/")
        assert w.judgement in JUDGEMENTS and tuple(w.devices) == ("transformers",), w


def test_a_waiver_judged_on_another_release_marks_the_check_instead_of_waiving_it(tmp_path):
    """vllm's waivers are judged on vllm 0.33.0: on that release the u0 edge is waived; on 0.34.0 the same
    failure is a FAIL marked with the release of the judgement, and ``specsim field`` exits 1."""
    waivers = field.field_waivers("vllm")
    here = field.classify("vllm", _checks(), waivers, "vllm 0.33.0")
    there = field.classify("vllm", _checks(), waivers, "vllm 0.34.0")
    u0 = lambda fs: next(f for f in fs if f.check == "L1/edge/u0-masked-point")  # noqa: E731
    assert (u0(here).standing, u0(there).standing) == (field.WAIVED, field.JUDGED_ELSEWHERE)
    assert u0(there).judged_on == "vllm 0.33.0" and u0(there).deviation == "inclusive-acceptance"
    entry = field.device_entry("vllm", _checks(), None, "vllm 0.34.0", False, "H100", "c", there, waivers)
    assert entry["release"] == "0.34.0"
    assert entry["groups"]["L1-edges"]["waived"] == 0 and entry["groups"]["L1-edges"]["judged_elsewhere"] == 1
    text = field.render(field.merge([{"devices": [entry]}]))
    assert "| L1-edges | FAIL (1 judged on 0.33.0) |" in text
    assert "(judged on vllm 0.33.0; not waived on vllm 0.34.0)" in text
    assert field.group_verdict({"fail": 2}, waived=0, judged_elsewhere=1, judged_on="0.33.0") == \
        "FAIL (1 new, 1 judged on 0.33.0)"
    assert field.classify("vllm", _checks(), waivers)[0].standing != field.WAIVED   # no release named: not waived

    (tmp_path / "there.json").write_text(json.dumps({"devices": [entry]}))

    class Args:
        out, merge, render_only, extra = str(tmp_path / "out"), [str(tmp_path / "there.json")], True, []
    assert field_command.run(Args) == 1


def test_every_shipped_field_waiver_names_the_release_it_was_judged_on(tmp_path, monkeypatch):
    import devices.field
    for device in ("transformers", "vllm", "vllm-interpret", "flashinfer"):
        for w in field.field_waivers(device):
            release = field.release_of(w.judged_on)
            assert release and f"/v{release}/" in w.issue, (device, w.check, w.judged_on, w.issue)
    (tmp_path / "x_waivers.toml").write_text('[[waiver]]\ncheck = "conformance:L1/edge/k0"\n'
                                             'reason = "the k0 edge deviates here"\nissue = "https://x.example/1"\n')
    monkeypatch.setattr(devices.field, "__file__", str(tmp_path / "__init__.py"))
    from specsim.conformance.verdict.waivers import WaiverError
    with pytest.raises(WaiverError, match="judged_on"):
        field.field_waivers("x")


def test_a_judged_on_that_names_no_release_is_refused(tmp_path):
    from specsim.conformance.verdict.waivers import WaiverError, load
    path = tmp_path / "w.toml"
    path.write_text('[[waiver]]\ncheck = "conformance:x"\nreason = "the x check deviates here"\n'
                    'issue = "https://x.example/1"\njudged_on = "5.23.0"\n')
    with pytest.raises(WaiverError, match=r"entry 1: 'judged_on' must name the engine and the release"):
        load(str(path))


def test_conform_waivers_judged_on_another_release_waive_nothing():
    from specsim.conformance.verdict.waivers import Waiver
    from specsim.conformance.core.results import CheckResult
    from specsim.conformance.verdict.conform_waivers import WaiverFile, apply
    w = Waiver(check="conformance:L1/edge/*", reason="known", issue="https://x.example/1", source="f, entry 1",
               judged_on="acme 1.0")
    results = [CheckResult("L1/edge/a", "L1", "fail")]
    kept, record = apply(results, WaiverFile("f", "0" * 64, (w,)), device_spec="dev", engine="acme 1.1")
    assert kept[0].waiver is None and record["waived"] == []
    assert "judged on acme 1.0; this run's device runs acme 1.1" in record["not_applicable"][0]["why"]
    kept, record = apply(results, WaiverFile("f", "0" * 64, (w,)), device_spec="dev", engine="acme 1.0")
    assert kept[0].waiver is not None


def test_a_schema_1_table_still_loads_and_renders():
    """``field.json`` before releases: no ``schema``, no ``standing``, no ``release``: judged findings are waived
    as they were; merging writes schema 2. The stored table behind docs/field.md renders, and rewaived by
    today's files its transformers run (on 5.23.0, the release judged) is waived as before."""
    entry = field.device_entry("vllm", _checks(), None, "vllm 0.33.0", False, "H100", "c",
                               field.classify("vllm", _checks(), field.field_waivers("vllm"), "vllm 0.33.0"), [])
    old = json.loads(json.dumps({"devices": [entry]}))
    del old["devices"][0]["release"]
    for f in old["devices"][0]["findings"]:
        del f["standing"], f["judged_on"]
    for counts in old["devices"][0]["groups"].values():
        del counts["judged_elsewhere"]
    doc = field.merge([old])
    assert doc["schema"] == field.SCHEMA and doc["devices"][0]["release"] == "0.33.0"
    assert "| L1-edges | pass (1 waived) |" in field.render(doc)

    import pathlib
    stored = json.loads((pathlib.Path(__file__).parents[2] / "docs/field-results/field.json").read_text())
    doc = field.rewaive(field.merge([stored]))
    (hf,) = [e for e in doc["devices"] if e["device"] == "transformers"]
    assert hf["engine"] == "transformers 5.23.0" and hf["groups"]["L1-edges"]["waived"] == 12
    assert "| transformers 5.23.0 (`transformers`) | CPU (x86_64), no GPU | L1-edges | pass (12 waived) |" in \
        field.render(doc)


def _release_run(release, findings, statuses, error=None):
    checks = {"L1-edges": [{"name": "L1/edge/draft-prob-zero", "status": "fail" if findings else "pass"},
                           {"name": "L1/edge/k0", "status": "pass"}]}
    waivers = field.field_waivers("transformers")
    found = field.classify("transformers", checks, waivers, f"transformers {release}") if findings else []
    entry = field.device_entry("transformers", None if error else checks, error, f"transformers {release}", True,
                               "CPU", "c", found, waivers)
    return {"release": release, "install": None if error else {"path": "/x", "pins": [f"transformers=={release}"],
                                                               "reused": True},
            "error": None, "entries": [entry], "statuses": {"transformers": statuses}}


def test_the_release_table_has_a_row_per_failing_check_and_a_column_per_release():
    runs = [_release_run("5.24.0", True, {"L1/edge/draft-prob-zero": "fail"}),
            _release_run("5.23.0", True, {"L1/edge/draft-prob-zero": "fail"}),
            _release_run("5.25.0", False, {"L1/edge/draft-prob-zero": "pass"}),
            _release_run("5.17.0", False, {}, error="DeviceLoadError: ...also requires is_done_candidate...")]
    block = field.release_runs_block("transformers", "transformers", ["transformers"], runs, where="CPU",
                                     quick=True, groups=["L1-edges"], command="specsim field --releases ...")
    assert [r["release"] for r in block["runs"]] == ["5.17.0", "5.23.0", "5.24.0", "5.25.0"]
    text = "\n".join(field.render_releases(block))
    assert "| `transformers` | 5.17.0 | 5.23.0 | 5.24.0 | 5.25.0 |" in text
    assert ("| L1-edges | - | pass (1 waived) | FAIL (1 judged on 5.23.0) | pass |") in text
    assert ("| `L1/edge/draft-prob-zero` | draft-prob-zero-accepted | not run | waived (judged here) | "
            "FAIL: judged on 5.23.0 | pass |") in text
    assert "not run: DeviceLoadError: ...also requires is_done_candidate..." in text

    later = field.release_runs_block("transformers", "transformers", ["transformers"],
                                     [_release_run("5.24.0", False, {"L1/edge/draft-prob-zero": "pass"})],
                                     where="CPU", quick=True, groups=["L1-edges"], command="c")
    doc = field.merge([{"devices": [], "releases": [block]}, {"devices": [], "releases": [later]}])
    (merged,) = doc["releases"]
    assert [r["release"] for r in merged["runs"]] == ["5.17.0", "5.23.0", "5.24.0", "5.25.0"]
    assert merged["runs"][2]["entries"][0]["findings"] == []          # 5.24.0 from the later document
    assert merged["command"] == "specsim field --releases ...; c"
    assert "## Releases" in field.render(doc) and "## Verdicts" not in field.render(doc)


def test_devices_lists_the_engine_release_a_field_adapter_runs():
    from devices.field.hf_transformers import CAPABILITIES
    from specsim.commands import devices as devices_command

    class Adapter:
        capabilities, engine = CAPABILITIES, "transformers 5.24.0"
    assert devices_command._described(Adapter()).startswith("transformers 5.24.0: ")


def test_releases_usage_errors_name_the_option(tmp_path, capsys):
    class Args:
        out, merge, render_only, rewaive, extra, quick, where, group_timeout = str(tmp_path), [], False, False, [], \
            True, "here", None
        groups, devices, engine, releases = "capabilities", ["transformers"], None, "5.23.0,latest"
    assert field_command.run(Args) == 2 and "--releases: 'latest' is not a release number" in capsys.readouterr().out
    Args.releases, Args.devices = "5.23.0", ["vllm"]
    assert field_command.run(Args) == 2 and "--releases needs one engine" in capsys.readouterr().out
    Args.releases, Args.devices, Args.engine = None, None, "transformers"
    assert field_command.run(Args) == 2 and "--engine goes with --releases" in capsys.readouterr().out


def test_docs_field_md_shows_the_stored_table_as_it_renders_now():
    """docs/field.md's block is ``docs/field-results/field.json`` rendered: every figure in it is the stored runs'.
    (``python -m specsim.figures.numbers`` leaves the block to this check.)"""
    import pathlib
    page = pathlib.Path(__file__).parents[2] / "docs" / "field.md"
    assert field.BLOCK.search(page.read_text()), "docs/field.md has no <!-- specsim:field ... --> block"
    assert field.stale_blocks(page) == []


def test_a_changed_figure_in_a_field_block_is_stale_and_write_restores_it(tmp_path):
    waivers = field.field_waivers("vllm")
    entry = field.device_entry("vllm", _checks(), None, "vllm 0.33.0", False, "H100", "specsim field ...",
                               field.classify("vllm", _checks(), waivers, "vllm 0.33.0"), waivers)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "field.json").write_text(json.dumps({"devices": [entry]}))
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n<!-- specsim:field results/field.json -->\n<!-- /specsim:field -->\n\nHand-written.\n")
    assert field.main(["--check", str(page)]) == 1                  # empty: differs from the rendered table
    assert field.main(["--write", str(page)]) == 0 and field.main(["--check", str(page)]) == 0
    text = page.read_text()
    assert "| L1-edges | pass (1 waived) | 1 | 1 |" in text and text.endswith("<!-- /specsim:field -->\n\nHand-written.\n")
    page.write_text(text.replace("| L1-edges | pass (1 waived) | 1 | 1 |", "| L1-edges | pass (1 waived) | 9 | 1 |"))
    assert len(field.stale_blocks(page)) == 1
    page.write_text("no block\n")
    assert field.main(["--check", str(page)]) == 1


def test_the_figures_check_skips_exactly_the_field_block():
    from specsim.figures import numbers
    text = ("took 5 s\n<!-- specsim:field results/field.json -->\n| 3 pass | 2.0 s |\n<!-- /specsim:field -->\n"
            "then 7 checks\n")
    kept = numbers._without_marked(text)
    assert kept.count("\n") == text.count("\n")
    assert [m[0] for m in numbers.FIGURE.finditer(kept)] == ["5 s", "7 checks"]
    assert numbers.re.search(numbers.FIELD_BLOCK, text, numbers.re.S)[0] == field.BLOCK.search(text)[0]


def test_a_neighbours_finding_with_both_known_causes_is_confirmed_only_when_each_is_needed(monkeypatch):
    """A §12 edge's filler rows can hold a top-p row vLLM cuts short and a min_tokens bonus row in one batch: the
    waiver's cause is confirmed when it alone, or both causes together, make the rows agree — not when the other
    cause alone does (then the waiver named the wrong cause)."""
    from specsim.field import table

    def runs(agree):   # agree: the sets of knobs turned off under which the rows agree
        def again(device, check, quick, checks, changed, **knob):
            off = frozenset(k for k, v in knob.items() if v is False)
            return f"confirmed: with {changed}" if off in agree else f"NOT confirmed: with {changed}"
        return again

    top_p, min_tokens = frozenset({"filler_top_p"}), frozenset({"filler_min_tokens"})
    both = top_p | min_tokens
    check = "L1-sampler/edge-neighbours/allowed-ids-at-the-bonus-row/canonical/mixed"
    for agree, want in (({top_p, both}, "confirmed: with every filler's top-p off"),
                        ({both}, "confirmed: both known causes"),
                        ({min_tokens, both}, "NOT confirmed"),
                        (set(), "NOT confirmed")):
        monkeypatch.setattr(table, "_neighbours_again", runs(agree))
        assert table.confirm_neighbours_top_p(None, check, True).startswith(want), agree
    monkeypatch.setattr(table, "_neighbours_again", runs({both}))
    assert table.confirm_neighbours_min_tokens(None, check, True).startswith("confirmed: both known causes")
