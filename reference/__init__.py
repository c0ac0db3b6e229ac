"""The ground truth: exact semantics of one speculative verification step.

numpy and the standard library only; imports nothing else of specsim's.
``SPEC.md`` beside this file is the normative text; the code follows it
section by section.
"""

SPEC_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "1.10", "1.11", "1.12", "1.13", "1.14", "1.15")  # every published (frozen) SPEC.md, oldest first: see its "Version history"
SPEC_VERSION = SPEC_VERSIONS[-1]
"""The version this code implements (SPEC.md's header states it); every report names the one it judged against."""
