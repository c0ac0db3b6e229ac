"""The ground truth: exact semantics of one speculative verification step.

numpy and the standard library only; imports nothing else of specsim's.
``SPEC.md`` beside this file is the normative text; the code follows it
section by section.
"""
