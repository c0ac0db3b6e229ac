"""The ground truth: exact semantics of one speculative verification step.

numpy and the standard library only; imports nothing else of specsim's.
``SPEC.md`` beside this file is the normative text; the code follows it
section by section.
"""

SPEC_VERSION = "1.0"
"""The version of ``SPEC.md`` this code implements (its header states the same); every
conformance document and report names the version it was judged against (SPEC §10)."""
