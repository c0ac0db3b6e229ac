"""Benchmarks: a verification step timed against its memory-bandwidth floor and the field's samplers
(``specsim bench``), and the tree step against the chain step (``trees``). Figures come from these
commands, never from timed assertions in tests.

``step`` is ``specsim bench``'s benchmark (its rows and tables), ``harness`` how it times (CUDA events,
warm-up, median, graphs), ``workloads`` what it reads (inputs, bytes, floors, the SPEC §12 parameters),
``field`` vLLM's sampler beside it, ``floors`` the floors measured on the GPU (launches, one read pass, the
read stream); ``trees`` is ``python -m specsim.bench.trees``. Both write their tables
as records (``--record``) that the docs render."""
