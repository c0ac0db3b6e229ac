"""``specsim field``'s upstream reports (``specsim.field.upstream``): the kinds, the shipped report material,
and the generator on a fake confirmed deviation (a ``field.json`` fixture, a fake engine package, a fake
reproduction run without specsim)."""

from __future__ import annotations

import json
import pathlib
import textwrap

import pytest

from specsim.conformance.verdict.waivers import JUDGEMENTS, UPSTREAM_STATUS, Waiver, WaiverError, parse_entry
from specsim.field import upstream as reports
from specsim.field.table import field_waivers

FIELD_DEVICES = ("vllm", "vllm-interpret", "flashinfer", "transformers")


# -- the kinds ---------------------------------------------------------------------------------------------------
def test_every_judgement_has_a_kind_and_only_losslessness_and_rng_breaks_are_reported():
    assert set(reports.KINDS) == set(JUDGEMENTS)
    assert [j for j in JUDGEMENTS if reports.is_reported(j)] == ["loss of losslessness", "RNG-contract break"]
    assert not reports.is_reported("contract difference") and not reports.is_reported("adapter limitation")
    assert reports.gravest(["contract difference", "RNG-contract break"]) == "RNG-contract break"
    assert reports.gravest(["unjudged: a new deviation", "adapter limitation"]) == "adapter limitation"


def test_upstream_status_must_name_its_kind_and_link_what_was_found():
    ok = parse_entry({"check": "c", "reason": "the engine deviates at this edge", "issue": "https://x.example/1",
                      "upstream_status": "open issue: https://github.com/o/r/issues/7"}, "f, entry 1")
    assert ok.upstream_status.startswith("open issue")
    assert parse_entry({"check": "c", "reason": "the engine deviates at this edge", "issue": "https://x.example/1",
                        "upstream_status": "none found: searched the tracker"}, "f").upstream_status
    for bad, rule in (("maybe: https://x.example/2", "must begin with one of"),
                      ("documented: in its docstring", "must carry the link")):
        with pytest.raises(WaiverError, match=rule):
            parse_entry({"check": "c", "reason": "the engine deviates at this edge", "issue": "https://x.example/1",
                         "upstream_status": bad}, "f")
    assert "none found" in UPSTREAM_STATUS


# -- the shipped material ------------------------------------------------------------------------------------------
def _deviations():
    out: dict[tuple[str, str], list[Waiver]] = {}
    for device in FIELD_DEVICES:
        for w in field_waivers(device):
            out.setdefault((device, w.deviation), []).append(w)
    return out


def test_each_reported_deviation_has_a_report_entry_and_one_upstream_status():
    entries = reports.load_entries()
    reported = {key: ws for key, ws in _deviations().items()
                if reports.is_reported(reports.gravest([w.judgement for w in ws]))}
    assert {d for _, d in reported} == {"inclusive-acceptance", "min-tokens-bonus-pre-step", "global-rng-consumed"}
    for (device, deviation), ws in reported.items():
        statuses = {w.upstream_status for w in ws if w.upstream_status}
        assert len(statuses) == 1, (device, deviation, statuses)   # a person's one finding, recorded
        entry = next(e for e in entries if e.deviation == deviation and device in e.devices)
        assert (reports.repro_dir() / entry.repro).is_file() and entry.sources and entry.spec.startswith("SPEC §")


def test_each_report_entry_names_a_reported_deviation_and_members_the_loader_pins():
    from devices.field import vllm_loader
    judged = {d: reports.gravest([w.judgement for w in ws]) for (_, d), ws in _deviations().items()}
    for e in reports.load_entries():
        assert reports.is_reported(judged[e.deviation]), e.deviation
        assert e.package != "vllm" or all(s.file in vllm_loader.PINNED for s in e.sources), e
        assert "V1 model runner" in e.runner or e.package != "vllm"


def test_flashinfers_row_keyed_stream_is_its_documented_contract_not_a_reported_bug():
    ws = [w for w in field_waivers("flashinfer") if w.deviation == "rng-keyed-by-batch-row"]
    assert [w.check for w in ws] == ["conformance:L2/batch-invariance", "conformance:L2/sizes/batch-invariance"]
    for w in ws:
        assert w.judgement == "contract difference" and not reports.is_reported(w.judgement)
        assert w.upstream_status.startswith("documented:")
        assert "v0.7.2.post1/flashinfer/sampling.py#L2302" in w.upstream_status


# -- the generator on a fake confirmed deviation ------------------------------------------------------------------
ACME_SAMPLER = textwrap.dedent('''\
    def accept(ratio, u):
        # the comparison under report
        return ratio >= u
    ''')
ACME_REPRO = textwrap.dedent('''\
    """acme 1.2: u = 0 accepts a draft of target probability 0."""
    import sys
    from acme_engine.sampler import accept
    got = accept(0.0, 0.0)
    print(f"expected: rejected; got: {'accepted' if got else 'rejected'}")
    sys.exit(1 if got else 0)
    ''')


def _finding(check, deviation, judgement, confirmed="", reason="why", status="fail"):
    return {"device": "acme", "check": check, "status": status, "seed": None, "detail": f"{check}: expected x, got y",
            "deviation": deviation, "judgement": judgement, "reason": reason, "link": "https://acme.example/l",
            "confirmed": confirmed, "group": "L1-edges"}


@pytest.fixture()
def acme(tmp_path, monkeypatch):
    """A fake engine package on the path, its reproduction, its report entry and its waivers."""
    package = tmp_path / "site" / "acme_engine"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sampler.py").write_text(ACME_SAMPLER)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    repros = tmp_path / "repro"
    repros.mkdir()
    (repros / "acme_zero_coin.py").write_text(ACME_REPRO)
    entry = reports.Entry(deviation="zero-coin", devices=("acme",), package="acme_engine",
                          repository="https://github.com/acme/engine", tag="v{release}", runner="the only runner",
                          title="u = 0 accepts a zero-probability draft", spec="SPEC §4 (u = 0)",
                          repro="acme_zero_coin.py", fix="compare strictly",
                          sources=(reports.Source("acme_engine/sampler.py", (1, 3), "ratio >= u"),))
    waivers = {"acme": [Waiver("conformance:L1/edge/u0-*", "why", "https://acme.example/l", deviation="zero-coin",
                               judgement="loss of losslessness",
                               upstream_status="open issue: https://github.com/acme/engine/issues/9"),
                        Waiver("conformance:L2/*", "rows", "https://acme.example/d", deviation="rng-rows",
                               judgement="contract difference",
                               upstream_status="documented: https://acme.example/doc")]}
    doc = {"devices": [{"device": "acme", "engine": "acme 1.2", "where": "CPU", "available": True, "findings": [
        _finding("L1/edge/u0-masked-point", "zero-coin", "loss of losslessness", reason="u = 0 accepts"),
        _finding("L1/edge/u-equal-ratio", "zero-coin", "semantics difference at an edge of SPEC"),
        _finding("L2/batch-invariance", "rng-rows", "contract difference"),
        _finding("L1/injected/x", "NEW", "unjudged: placeholder-row-read's confirming experiment did not confirm",
                 confirmed="NOT confirmed: still differs"),
        _finding("L1/edge/brand-new", "NEW", "unjudged: a new deviation")]}]}
    return dict(doc=doc, entries=[entry], waivers_of=lambda device: waivers.get(device, []), repros=repros,
                tmp=tmp_path)


def test_the_generator_writes_one_report_per_confirmed_reported_deviation(acme):
    out = acme["tmp"] / "out"
    written = reports.write_reports(acme["doc"], out, run_repros=False, entries=acme["entries"],
                                    waivers_of=acme["waivers_of"], repros=acme["repros"])
    assert written == ["acme-zero-coin.md"]
    assert sorted(p.name for p in (out / "upstream").iterdir()) == ["README.md", "acme-zero-coin.md"]
    text = (out / "upstream" / "acme-zero-coin.md").read_text()
    assert text.startswith("# [acme 1.2] u = 0 accepts a zero-probability draft\n")
    assert "**Kind:** loss of losslessness — a correctness bug" in text       # the gravest of its two judgements
    assert "**Engine:** acme 1.2; the only runner" in text
    assert "**Known upstream?** open issue: https://github.com/acme/engine/issues/9" in text
    assert "**SPEC clause:** SPEC §4 (u = 0)" in text and "u = 0 accepts" in text   # the gravest finding's reason
    assert ACME_REPRO.strip() in text                                        # the reproduction, embedded whole
    assert "    3      return ratio >= u" in text                          # quoted from the loaded package
    assert "https://github.com/acme/engine/blob/v1.2/acme_engine/sampler.py#L1-L3" in text
    assert "`L1/edge/u0-masked-point`" in text and "`L1/edge/u-equal-ratio`" in text
    assert "brand-new" not in text and "L1/injected/x" not in text          # NEW findings are not reported
    index = (out / "upstream" / "README.md").read_text()
    assert "| acme 1.2 | `rng-rows` | contract difference | documented: https://acme.example/doc | " \
           "none (contract difference) |" in index
    assert "[acme-zero-coin.md](acme-zero-coin.md)" in index


def test_the_generator_runs_the_reproduction_without_specsim_and_shows_expected_vs_got(acme):
    out = acme["tmp"] / "out"
    reports.write_reports(acme["doc"], out, run_repros=True, entries=acme["entries"],
                          waivers_of=acme["waivers_of"], repros=acme["repros"])
    text = (out / "upstream" / "acme-zero-coin.md").read_text()
    assert "## Expected vs got" in text and "this project's packages not importable; exit 1" in text
    assert "expected: rejected; got: accepted" in text


def test_a_reported_deviation_without_an_entry_is_written_marked_incomplete(acme):
    out = acme["tmp"] / "out"
    reports.write_reports(acme["doc"], out, run_repros=False, entries=[], waivers_of=acme["waivers_of"])
    text = (out / "upstream" / "acme-zero-coin.md").read_text()
    assert "**INCOMPLETE:**" in text and "Known upstream?** open issue" in text


def test_moved_source_lines_are_found_and_said_to_have_moved(tmp_path):
    path = tmp_path / "sampler.py"
    path.write_text("\n\n" + ACME_SAMPLER)                   # the judged lines 1-3 are two lines further down now
    lines, note = reports.quote(reports.Source("sampler.py", (1, 3), "ratio >= u"), path)
    assert "moved" in note and "line 5" in note and lines[0].startswith("    5  ")
    lines, note = reports.quote(reports.Source("sampler.py", (1, 3), "ratio > u"), path)
    assert lines == [] and "not the one judged" in note


def test_the_isolated_interpreter_refuses_this_projects_packages(tmp_path):
    script = tmp_path / "imports_specsim.py"
    script.write_text("import specsim\n")
    run = reports.run_standalone(script, timeout=120)
    assert run.returncode == reports.ISOLATION_FAILED and "must not import specsim's packages" in run.output
    assert not reports.importable_standalone("devices") and reports.importable_standalone("numpy")


def test_the_field_command_writes_the_reports_from_a_merged_run(tmp_path):
    from specsim.cli import main
    doc = {"devices": [{"device": "vllm-interpret", "engine": "vllm 0.33.0", "where": "CPU", "quick": True,
                        "command": "c", "available": True, "why_not": None, "waivers_not_observed": [],
                        "groups": {"L2-rng": {"pass": 0, "fail": 1, "not_supported": 0, "error": 0, "waived": 1}},
                        "findings": [_finding("L2/global-rng-untouched", "global-rng-consumed", "RNG-contract break")
                                     | {"device": "vllm-interpret", "group": "L2-rng"}]}]}
    merged = tmp_path / "run.json"
    merged.write_text(json.dumps(doc))
    assert main(["field", "--out", str(tmp_path / "out"), "--merge", str(merged), "--render-only", "--rewaive",
                 "--no-repro-run"]) == 0
    text = (tmp_path / "out" / "upstream" / "vllm-global-rng-consumed.md").read_text()
    assert "**Known upstream?** closed pull request: vLLM PR #40877" in text    # from the shipped waiver entry
    assert "RNG-contract break" in text and "vllm_global_rng_consumed_with_every_request_seeded.py" in text
    assert pathlib.Path(tmp_path / "out" / "upstream" / "README.md").is_file()


def test_two_runners_of_one_engine_are_reported_apart(acme):
    """Two devices of one engine release whose report entries differ (another runner): two reports, each with
    its runner, named apart; the same device set under one entry stays one report."""
    import dataclasses
    doc = json.loads(json.dumps(acme["doc"]))
    second = {**doc["devices"][0], "device": "acme-v2",
              "findings": [dict(f, device="acme-v2") for f in doc["devices"][0]["findings"]]}
    doc["devices"].append(second)
    entries = acme["entries"] + [dataclasses.replace(acme["entries"][0], devices=("acme-v2",), runner="runner two")]
    out = acme["tmp"] / "out"
    written = reports.write_reports(doc, out, run_repros=False, entries=entries,
                                    waivers_of=lambda device: acme["waivers_of"]("acme"), repros=acme["repros"])
    assert written == ["acme-zero-coin-1.2-acme.md", "acme-zero-coin-1.2-acme-v2.md"]
    assert "the only runner" in (out / "upstream" / written[0]).read_text()
    assert "runner two" in (out / "upstream" / written[1]).read_text()
    merged = dataclasses.replace(acme["entries"][0], devices=("acme", "acme-v2"))
    assert reports.write_reports(doc, out, run_repros=False, entries=[merged],
                                 waivers_of=lambda device: acme["waivers_of"]("acme"),
                                 repros=acme["repros"]) == ["acme-zero-coin.md"]
    assert sorted(p.name for p in (out / "upstream").iterdir()) == ["README.md", "acme-zero-coin.md"]   # none stale
