"""The ground truth: exact semantics of one speculative verification step.

numpy and the standard library only; imports nothing else of specsim's.
``SPEC.md`` beside this file is the normative text; the code follows it
section by section.
"""

SPEC_VERSIONS = ("1.0", "1.1")
"""Every published version of ``SPEC.md``, oldest first (its "Version history" lists what each
added). A published version is frozen: a new requirement makes a new version."""

SPEC_VERSION = SPEC_VERSIONS[-1]
"""The version of ``SPEC.md`` this code implements (its header states the same); every
conformance document and report names the version it was judged against (SPEC §10)."""
