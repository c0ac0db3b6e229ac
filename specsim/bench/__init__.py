"""Benchmarks: a verification step timed against its memory-bandwidth floor and the field's samplers
(``specsim bench``), and the tree step against the chain step (``trees``). Figures come from these
commands, never from timed assertions in tests."""
