"""The vocabulary every check speaks: results (``CheckResult``), the run's ``Context`` (``context``), calls to a
device judged against its declaration (``calls``: refusals, malformed and mutated returns, the tree gate), the L1
judge, the scope recorder, the SPEC-version annotations, the ``BlackBox`` view and what a group declares
(``groups``).

It imports nothing of the conformance suite above it: every other room may import it.
"""
