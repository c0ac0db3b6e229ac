"""The vocabulary every check speaks: results (``CheckResult``), the run's ``Context``, calls to a device
judged against its declaration (``calls``: refusals, malformed and mutated returns, the tree gate), the L1
judge, the scope recorder, the SPEC-version annotations and the ``BlackBox`` view.

It imports nothing of the conformance suite above it: every other room may import it.
"""
