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

FIELD_DEVICES = ("vllm", "vllm-interpret", "flashinfer", "transformers", "transformers-gemma4-assistant")


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
    assert {d for _, d in reported} == {"inclusive-acceptance", "min-tokens-bonus-pre-step", "argmax-drafts-raw-q",
                                        "offsets-int32", "empty-residual-token-zero"}
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
        pinned = {**vllm_loader.PINNED, **vllm_loader.V2_PINNED}   # the V1 runner's members and V2's
        assert e.package != "vllm" or all(s.file in pinned for s in e.sources), e
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
                          repository="https://github.com/acme/engine", version="1.2", tag="v{version}",
                          runner="the only runner", title="u = 0 accepts a zero-probability draft",
                          what="u = 0 accepts a draft of target probability 0", expected="rejected at every u",
                          impact="once in 2^53 draws", spec="SPEC §4 (u = 0)", repro="acme_zero_coin.py",
                          fix="compare strictly", probability="2^-53 per draft",
                          threads=(reports.Thread("acme #9", "https://github.com/acme/engine/issues/9", "the report"),),
                          sources=(reports.Source("acme_engine/sampler.py", (1, 3), "ratio >= u"),))
    waivers = {"acme": [Waiver("conformance:L1/edge/u0-*", "why", "https://acme.example/l", deviation="zero-coin",
                               judgement="loss of losslessness",
                               upstream_status="open issue: https://github.com/acme/engine/issues/9"),
                        Waiver("conformance:L2/*", "rows", "https://acme.example/d", deviation="rng-rows",
                               judgement="contract difference",
                               upstream_status="documented: https://acme.example/doc")]}
    doc = {"devices": [{"device": "acme", "engine": "acme 1.2 (fast runner)", "where": "CPU", "available": True,
                        "findings": [
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
    assert text.startswith("# [acme 1.2] u = 0 accepts a zero-probability draft\n")   # the version, not display text
    assert "**Kind:** loss of losslessness, with probability 2^-53 per draft — a correctness bug" in text
    assert "(tag `v1.2`); the only runner" in text and "**Filed as:** an issue" in text
    assert "**Known upstream?** open issue: https://github.com/acme/engine/issues/9" in text
    assert "u = 0 accepts a draft of target probability 0" in text and "rejected at every u" in text
    assert ACME_REPRO.strip() in text                                        # the reproduction, embedded whole
    assert "    3      return ratio >= u" in text                          # quoted from the loaded package
    assert "(https://github.com/acme/engine/blob/v1.2/acme_engine/sampler.py#L1-L3)" in text
    assert "* [acme #9](https://github.com/acme/engine/issues/9): the report" in text
    assert "Exit status 0: the lossless answer; 1: the bug is present; 3: a dependency is missing" in text
    assert "L1/edge" not in text and "SPEC §" not in text and "specsim" not in text   # our numbering stays home
    assert reports.upstream_text_problems(text, acme["entries"][0]) == []
    index = (out / "upstream" / "README.md").read_text()
    assert "| acme 1.2 | `rng-rows` | contract difference | documented: https://acme.example/doc | " \
           "none (contract difference) |" in index
    assert "[acme-zero-coin.md](acme-zero-coin.md)" in index
    assert "`L1/edge/u0-masked-point` (acme)" in index and "u-equal-ratio" not in index   # the gravest kind's only
    assert "brand-new" not in index and "L1/injected/x" not in index          # NEW findings are not reported


def test_the_generator_runs_the_reproduction_without_specsim_and_shows_expected_vs_got(acme):
    out = acme["tmp"] / "out"
    reports.write_reports(acme["doc"], out, run_repros=True, entries=acme["entries"],
                          waivers_of=acme["waivers_of"], repros=acme["repros"])
    text = (out / "upstream" / "acme-zero-coin.md").read_text()
    assert "## Observed" in text and "against the installed package): exit 1, the bug is present" in text
    assert "expected: rejected; got: accepted" in text and "## Environment" in text and "torch " in text
    assert reports.upstream_text_problems(text, acme["entries"][0]) == []


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


def _field_reports_of(tmp_path, row: dict, findings: list) -> pathlib.Path:
    """``specsim field --merge`` of one run holding ``row`` (its device, engine, where, quick, groups) and
    ``findings`` (each tagged with the row's device), rendered with the shipped waivers: its upstream folder."""
    from specsim.cli import main
    device = row["device"]
    doc = {"devices": [{"command": "c", "available": True, "why_not": None, "waivers_not_observed": [], **row,
                        "findings": [f | {"device": device} for f in findings]}]}
    merged = tmp_path / "run.json"
    merged.write_text(json.dumps(doc))
    assert main(["field", "--out", str(tmp_path / "out"), "--merge", str(merged), "--render-only", "--rewaive",
                 "--no-repro-run"]) == 0
    return tmp_path / "out" / "upstream"


def test_the_field_command_writes_the_reports_from_a_merged_run(tmp_path):
    row = {"device": "vllm-interpret", "engine": "vllm 0.33.0", "where": "CPU", "quick": True,
           "groups": {"L2-rng": {"pass": 0, "fail": 1, "not_supported": 0, "error": 0, "waived": 1}}}
    upstream = _field_reports_of(tmp_path, row, [
        _finding("L2/global-rng-untouched", "global-rng-consumed", "RNG-contract break") | {"group": "L2-rng"},
        _finding("L1-sampler/edge/min-tokens-crossing/vllm", "min-tokens-bonus-pre-step", "loss of losslessness")
        | {"group": "L1-sampler"}])
    text = (upstream / "vllm-min-tokens-bonus-pre-step.md").read_text()
    assert "**Known upstream?** none found: no report of the bonus row" in text   # from the shipped waiver entry
    assert "vllm_min_tokens_bonus_reads_pre_step_output.py" in text
    index = pathlib.Path(tmp_path / "out" / "upstream" / "README.md").read_text()
    assert "| `global-rng-consumed` | contract difference | closed pull request: vLLM PR #40877" in index
    assert not (tmp_path / "out" / "upstream" / "vllm-global-rng-consumed.md").exists()   # a note, never filed


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


# -- every shipped report, rendered from the stored field runs, as a maintainer reads it ---------------------------
def _shipped_reports(tmp_path) -> dict[str, tuple[str, "reports.Entry"]]:
    from specsim.field.table import rewaive
    doc = rewaive(json.loads((pathlib.Path(__file__).parents[2] / "docs/field-results/field.json").read_text()))
    written = reports.write_reports(doc, tmp_path, run_repros=False)
    entries = reports.load_entries()
    out = {}
    for name in written:
        entry = next(e for e in entries if name.startswith(f"vllm-{e.deviation}") or e.deviation in name)
        out[name] = ((tmp_path / "upstream" / name).read_text(), entry)
    return out


def test_every_shipped_report_stands_on_its_own_with_working_links(tmp_path):
    """Links to the exact file and lines at the release tag of the pinned version (a path the pinned wheel holds),
    no path of this machine, no #<n> that is not an upstream thread linked in it, none of our own numbering."""
    from devices.field import vllm_loader
    shipped = _shipped_reports(tmp_path)
    assert sorted(shipped) == ["transformers-argmax-drafts-raw-q.md", "vllm-empty-residual-token-zero.md",
                               "vllm-inclusive-acceptance.md", "vllm-min-tokens-bonus-pre-step.md"]
    pinned = {**vllm_loader.PINNED, **vllm_loader.V2_PINNED}
    for name, (text, entry) in shipped.items():
        assert reports.upstream_text_problems(text, entry) == [], name
        paths = reports.blob_paths(text)
        if entry.package == "vllm":
            assert "(V1 runner)" not in text.split("\n")[0] and "/blob/v0.33.0/" in text, name
            assert paths and all(p in pinned for p in paths), (name, paths)
        else:   # transformers' files as its repository holds them at the tag: src/transformers/...
            assert "/blob/v5.23.0/" in text and paths and all(p.startswith("src/transformers/generation/")
                                                              for p in paths), (name, paths)
        for section in ("## What happens", "## Where in the code", "## Expected (lossless rejection sampling)",
                        "## Observed", "## Environment", "## Reproduction", "## Impact",
                        "## Related upstream threads", "## Suggested fix"):
            assert section in text, (name, section)
        assert "Exit status 0: the lossless answer; 1: the bug is present; 3: a dependency is missing" in text


def test_the_inclusive_comparison_is_a_one_line_pull_request_with_its_probability(tmp_path):
    text, entry = _shipped_reports(tmp_path)["vllm-inclusive-acceptance.md"]
    assert "**Kind:** loss of losslessness, with probability 2^-53" in text and entry.filing == "pull request"
    assert "Model Runner V2" in entry.title and "already compares strictly (`uniform_prob < rate`)" in text
    assert "sgl-project/sglang/issues/35771" in text and "sgl-project/sglang/pull/35798" in text
    assert "u-equal-ratio" not in text and "same in the synthetic" not in text


def test_the_min_tokens_report_shows_an_output_that_changes(tmp_path):
    text, _ = _shipped_reports(tmp_path)["vllm-min-tokens-bonus-pre-step.md"]
    assert "`min_tokens=3`, output so far `[2]`, drafts `[1, 1]`" in text
    assert "`[1, 1, 1]` instead of `[1, 1, 3]`" in text
    assert "stop delayed" in text
    for thread in ("pull/32642", "issues/26317", "issues/41758"):
        assert f"https://github.com/vllm-project/vllm/{thread}" in text


def test_the_gemma4_assistant_report_names_its_threads_and_its_rule(tmp_path):
    text, entry = _shipped_reports(tmp_path)["transformers-argmax-drafts-raw-q.md"]
    assert entry.devices == ("transformers-gemma4-assistant",) and entry.filing == "issue"
    assert "outputs.logits.argmax(dim=-1)" in text and "q = candidate_logits.softmax(dim=-1)" in text
    for thread in ("issues/47932", "pull/47961", "pull/48007"):
        assert f"https://github.com/huggingface/transformers/{thread}" in text
    assert "min(1, p(x)/q(x))" in text and "one-hot" in text


def test_the_global_generator_note_is_not_a_contract_break():
    ws = [w for w in field_waivers("vllm") if w.deviation == "global-rng-consumed"]
    assert ws and all(w.judgement == "contract difference" and not reports.is_reported(w.judgement) for w in ws)
    assert all("performance note" in w.reason and "#40877" in w.reason for w in ws)
    assert not [e for e in reports.load_entries() if e.deviation == "global-rng-consumed"]


def test_the_checker_catches_what_a_maintainer_would_trip_on():
    entry = reports.load_entries()[0]
    bad = ("See https://github.com/vllm-project/vllm/blob/v0.33.0 (V1 runner)/vllm/x.py#L1 and "
           "https://github.com/vllm-project/vllm/blob/v0.32.0/vllm/x.py#L1, quoted from /root/.cache/x/vllm/x.py "
           "(vLLM #38, #1); SPEC §4; check L1/edge/u0-masked-point.")
    problems = " | ".join(reports.upstream_text_problems(bad, entry))
    for what in ("malformed link", "not https://github.com/vllm-project/vllm at tag v0.33.0", "local path",
                 "#38: no upstream thread", "#1: no upstream thread", "a SPEC section", "a check name"):
        assert what in problems, (what, problems)
    assert reports.scrub("File /root/.cache/specsim/vllm/x.py, line 3") == "File .../x.py, line 3"


def test_a_reproduction_that_cannot_run_reads_missing_dependency_never_bug_present(tmp_path):
    """Without Triton the vLLM reproductions cannot run on the wheel's members: exit 3 and the report says so."""
    import importlib.util
    if importlib.util.find_spec("triton") is not None or reports.importable_standalone("vllm"):
        pytest.skip("Triton (or vLLM) is installed here: the reproduction runs (test_repro_standalone.py)")
    entry = next(e for e in reports.load_entries() if e.deviation == "min-tokens-bonus-pre-step")
    run = reports.run_repro(entry, timeout=120)
    assert run.returncode == reports.MISSING_DEPENDENCY and "missing dependency" in run.output, run.output[-2000:]
    d = reports.Deviation("vllm", "0.33.0", entry.deviation, "loss of losslessness", ["vllm-interpret"],
                          [{"device": "vllm-interpret", "where": "CPU (x86_64), no GPU"}], entry=entry)
    text = reports.render_report(d, entry, run)
    assert "exit 3, a dependency is missing: nothing was checked" in text and "exit 1" not in text
    assert reports.upstream_text_problems(text, entry) == []


# -- a report rendered from a record of measured figures (a GPU run this machine cannot repeat) ------------------
ROOT = pathlib.Path(__file__).parents[2]
OFFSETS_RECORD = ROOT / "docs" / "results" / "offsets-h200.json"
OFFSETS_REPORT = ROOT / "docs" / "field-results" / "upstream-vllm-offsets-int32.md"


def _offsets():
    entry = reports.entry_for("offsets-int32", "vllm", reports.load_entries())
    return entry, reports.recorded_deviation(json.loads(OFFSETS_RECORD.read_text()), entry, "vllm")


def test_the_offsets_deviation_is_the_records_v1_rows_its_waivers_judge():
    entry, d = _offsets()
    assert (d.engine, d.release, d.judgement, d.devices) == ("vllm", "0.33.0", "loss of losslessness", ["vllm"])
    assert [f["check"] for f in d.findings] == ["L1/offsets/injected/draft-rows-2^31",
                                                "L1/offsets/injected/target-rows-2^32",
                                                "L1/offsets/injected/draft-rows-2^32"]
    assert all("NVIDIA H200" in f["where"] and "torch 2.11.0+cu130" in f["where"] for f in d.findings)
    assert d.upstream_status.startswith("open pull request: vLLM PR #48055")
    with pytest.raises(ValueError, match="no finding"):
        reports.recorded_deviation(json.loads(OFFSETS_RECORD.read_text()), entry, "vllm-v2")


def test_the_offsets_report_stands_on_its_own_and_quotes_the_recorded_run():
    from devices.field import vllm_loader
    entry, d = _offsets()
    run = reports.ReproRun("not itself run on a GPU", None, "")
    text = reports.render_report(d, entry, run)
    assert reports.upstream_text_problems(text, entry) == []
    assert set(reports.blob_paths(text)) == {"vllm/v1/sample/rejection_sampler.py"} <= set(vllm_loader.PINNED)
    assert "/blob/v0.33.0/vllm/v1/sample/rejection_sampler.py#L940-L948" in text
    for section in ("## What happens", "## Where in the code", "## Expected (lossless rejection sampling)",
                    "## Observed", "## Environment", "## Reproduction", "## Impact", "## Related upstream threads",
                    "## Suggested fix"):
        assert section in text, section
    assert "raised `RuntimeError: Triton Error`" in text and "The standalone reproduction below: not itself run" in text
    assert "Each step ran in a process of its own" in text
    assert "Found on: NVIDIA H200 (driver 580.159.04)" in text and "compiled on the GPU" in text
    for thread in ("pull/48055", "pull/46560", "pull/47383"):
        assert f"https://github.com/vllm-project/vllm/{thread}" in text


def test_the_stored_offsets_report_is_the_command_rendered_now(tmp_path, cache):
    """docs/field-results/upstream-vllm-offsets-int32.md is what ``python -m specsim.field.upstream --record
    docs/results/offsets-h200.json --deviation offsets-int32 --device vllm`` writes on a machine without a GPU
    (the lines quoted from the pinned wheel's members)."""
    import torch
    if torch.cuda.is_available():
        pytest.skip("on a GPU the command runs the reproduction and shows its output")
    out = tmp_path / "report.md"
    assert reports.main(["--record", str(OFFSETS_RECORD), "--deviation", "offsets-int32", "--device", "vllm",
                         "--out", str(out)]) == 0
    assert out.read_text() == OFFSETS_REPORT.read_text()
    assert reports.upstream_text_problems(OFFSETS_REPORT.read_text(), _offsets()[0]) == []


def test_the_offsets_report_quotes_the_records_own_run_of_the_reproduction():
    """The record keeps the reproduction's run on the H200 (exit 1, its output): a report rendered without a GPU
    quotes it, naming the machine it ran on, not this one; a record without one, or of another script, gives none."""
    entry, d = _offsets()
    record = json.loads(OFFSETS_RECORD.read_text())
    run = reports.recorded_run(record, entry)
    assert (run.returncode, "NVIDIA H200" in run.where) == (1, True)
    text = reports.render_report(d, entry, run)
    assert "run on the machine the record names" in text and "exit 1, the bug is present" in text
    assert "an illegal memory access was encountered" in text
    assert "* The reproduction's run above: NVIDIA H200" in text
    assert reports.recorded_run({k: v for k, v in record.items() if k != "reproduction"}, entry) is None
    other = dict(record, reproduction=dict(record["reproduction"], script="devices/field/repro/other.py"))
    assert reports.recorded_run(other, entry) is None


def test_a_field_run_of_the_offsets_group_on_a_gpu_writes_the_same_report(tmp_path):
    """``specsim field`` on a merged run whose ``vllm`` rows hold the offsets fault: judged by the shipped waiver,
    reported through the shipped entry, with the recorded H200 observation quoted."""
    row = {"device": "vllm", "engine": "vllm 0.33.0 (V1 runner)", "where": "NVIDIA H200, torch 2.11.0+cu130",
           "quick": False, "groups": {"L1-offsets": {"pass": 1, "fail": 0, "not_supported": 0, "error": 1,
                                                     "waived": 1}}}
    upstream = _field_reports_of(tmp_path, row, [
        _finding("L1/offsets/injected/draft-rows-2^31", "offsets-int32", "loss of losslessness", status="error")
        | {"group": "L1-offsets"}])
    text = (upstream / "vllm-offsets-int32.md").read_text()
    assert "**Known upstream?** open pull request: vLLM PR #48055" in text
    assert "raised `RuntimeError: Triton Error`" in text and "vllm_v1_offsets_past_2_31.py" in text
    assert reports.upstream_text_problems(text, _offsets()[0]) == []
