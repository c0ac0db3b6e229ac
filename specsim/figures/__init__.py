"""Figures in the docs that a command produces, checked so they cannot drift.

* ``numbers`` — counts and statistical figures marked in the Markdown, recomputed from this checkout;
  measured figures (timings, GPU results) name the command that gave them;
* ``architecture`` — the import map of docs/architecture.md, drawn from the code itself.
"""
