"""Reports: ``report.html`` (self-contained, with plots), ``report.md`` (PR tables) and ``report.json``.

Built only from JSON on disk — ``conformance.json`` (``specsim conform``),
``mutants.json`` (``specsim mutants``), ``specsim simulate --json`` output —
so an archived run re-renders later. ``specsim report --in DIR`` and
``specsim conform --out DIR`` call :func:`render_directory`.

Modules: ``inputs`` (find and classify JSON), ``tables`` (content as plain
tables), ``plots`` (matplotlib figures, optional), ``html`` and ``markdown``
(layout and escaping), ``render`` (build and write).
"""

from reports.inputs import Inputs, load_inputs
from reports.render import build, render_directory, write

__all__ = ["Inputs", "load_inputs", "build", "write", "render_directory"]
