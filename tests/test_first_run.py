"""The README's first command, run in a fresh environment, writes ``report.html``
with its plots — real embedded PNGs that decode, not just ``<img>`` tags.

CI (``.ci/run``) runs that command verbatim (``.ci/readme_commands.py`` reads it out of
README.md) in its fresh venv before the tests, and points ``SPECSIM_FIRST_RUN_OUT`` at the
``out/`` it wrote: ``test_first_run_report_embeds_its_plots`` checks that directory.
Without the variable that test is skipped (saying so), and
``test_first_run_in_a_fresh_venv`` (slow, opt in with ``--run-slow``) does the whole
thing itself: clones this checkout, makes a venv, runs the command, checks the report.
"""

from __future__ import annotations

import base64
import binascii
import io
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIGURES = ("fig-pvalues", "fig-dist-tokens", "fig-dist-num_accepted")
"""The figures one device's default conformance run draws (reports/plots.py; the device × check matrix needs two devices)."""

IMG = re.compile(r'<figure id="(?P<id>[^"]+)"><img alt="[^"]*" src="data:image/png;base64,(?P<data>[^"]*)">')


def readme_commands() -> list[str]:
    sys.path.insert(0, str(ROOT / ".ci"))
    try:
        from readme_commands import readme_commands as parse
    finally:
        sys.path.pop(0)
    return parse((ROOT / "README.md").read_text(encoding="utf-8"))


def embedded_figures(html: str) -> dict[str, bytes]:
    """``figure id → PNG bytes`` of every figure embedded in a report; base64 that does not decode raises."""
    out = {}
    for m in IMG.finditer(html):
        try:
            out[m.group("id")] = base64.b64decode(m.group("data"), validate=True)
        except binascii.Error as e:
            raise AssertionError(f"report.html: figure {m.group('id')}: its data URI is not base64 ({e})") from e
    return out


def check_png(name: str, png: bytes) -> None:
    """A real picture: a PNG that decodes whole, of a plot's size, not one flat colour."""
    from PIL import Image  # matplotlib's own dependency

    assert png.startswith(b"\x89PNG\r\n\x1a\n"), f"{name}: not a PNG (starts {png[:8]!r})"
    image = Image.open(io.BytesIO(png))
    image.load()  # decodes every row: a truncated or corrupt stream raises here
    assert image.width >= 200 and image.height >= 150, f"{name}: {image.width}×{image.height} px, too small for a plot"
    extrema = image.convert("L").getextrema()
    assert extrema[0] < extrema[1], f"{name}: a single flat colour {extrema}"


def check_first_run(out: pathlib.Path) -> None:
    html_path = out / "report.html"
    assert html_path.is_file(), f"{out}: the first run wrote no report.html ({sorted(p.name for p in out.iterdir())})"
    html = html_path.read_text(encoding="utf-8")
    assert "matplotlib is not available" not in html, "report.html says matplotlib is missing: no plots"
    figures = embedded_figures(html)
    missing = [f for f in FIGURES if f not in figures]
    assert not missing, f"report.html lacks figures {missing} (has {sorted(figures)})"
    for name, png in figures.items():
        check_png(name, png)
    assert (out / "conformance.json").is_file() and (out / "report.md").is_file()
    import json
    scope = json.loads((out / "conformance.json").read_text())["verdict"]["scope"]
    # the whole suite asks every kernel variant the device declares (SPEC 1.14): none left unasked
    assert scope["unasked"] and not any(scope["unasked"].values()), scope["unasked"]
    # and each at every declared limit (SPEC 1.15): none short of one
    assert scope["unreached"] and not any(scope["unreached"].values()), scope["unreached"]


def test_ci_runs_the_readme_commands_verbatim():
    """.ci/run takes both commands from README.md, in order, before any optional dependency is installed (a
    newcomer's fresh machine has none); then the extras, and only the tests that need them; then the whole runs the
    default suite holds out for its time."""
    commands = readme_commands()
    assert commands[0] == "pip install -e . && specsim conform --device torch --out out/"
    assert commands[1].startswith('pip install -e ".[test]" && python -m pytest '), commands[1]
    ci = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
          if not line.lstrip().startswith("#")]
    at = {what: next(i for i, line in enumerate(ci) if what in line) for what in (
        "readme_commands.py 1", "SPECSIM_FIRST_RUN_OUT", "readme_commands.py 2", ".ci/extras.sh", "-m needs_extra",
        "-m whole_run", "triton-newest.sh")}
    assert list(at.values()) == sorted(at.values()), at
    required = [i for i, line in enumerate(ci) if "SPECSIM_REQUIRE_" in line]
    assert required and min(required) > at[".ci/extras.sh"], "an extra required before .ci/extras.sh installs it"


def test_first_run_report_embeds_its_plots():
    out = os.environ.get("SPECSIM_FIRST_RUN_OUT")
    if not out:
        pytest.skip("SPECSIM_FIRST_RUN_OUT is not set: .ci/run sets it after running the README's first command "
                    "(or run the slow test_first_run_in_a_fresh_venv)")
    check_first_run(pathlib.Path(out))


def test_report_check_rejects_tags_without_pictures(tmp_path):
    """The check is not fooled by an <img> whose data is not a picture."""
    blank = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 64).decode()
    (tmp_path / "report.html").write_text("".join(f'<figure id="{f}"><img alt="x" src="data:image/png;base64,'
                                                  f'{blank}">' for f in FIGURES))
    (tmp_path / "conformance.json").write_text("{}")
    (tmp_path / "report.md").write_text("")
    with pytest.raises(Exception):
        check_first_run(tmp_path)


@pytest.mark.slow
def test_first_run_in_a_fresh_venv(tmp_path):
    """The whole newcomer path: a clone of this checkout's HEAD, a fresh venv, the README's first command."""
    clone, venv = tmp_path / "clone", tmp_path / "venv"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    subprocess.run(["bash", "-ec", readme_commands()[0]], cwd=clone, env=env, check=True, timeout=3600)
    check_first_run(clone / "out")
