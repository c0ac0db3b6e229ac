"""The field: the real engines' samplers and generate() held to SPEC.

* ``table`` — ``specsim field``: every field adapter through the conformance groups, each failing check
  sorted into a judged deviation (the adapter's waiver file) or a new one; field.json and field.md;
* ``releases`` — one engine's releases side by side (``specsim field --releases``);
* ``upstream`` — a deviation as the report an engine's project would read: a standalone reproduction,
  the upstream lines, the judgement;
* ``engines`` — end-to-end checks of an engine's speculative generate() against the exact law of whole
  sequences;
* ``v2_coupling`` — vLLM Model Runner V2's own drafter and verifier under one request seed, the emitted law
  held to the target's (``python -m specsim.field.v2_coupling``: the draft/residual noise of vLLM PR #54282).
"""
