"""The drafter suite (``specsim proposer``): the same discipline for a proposer as for a verifier.

It stands apart: it imports no other room of the conformance suite, and it is the suite's only import of the
engine.
"""
