"""End-to-end checks of real engines' generate(): the whole-sequence law of speculative generation.

* ``protocol`` — what an engine supplies (``GenerateEngine``): one sequence
  sampled with speculation for a seed, the target's next-token law for a
  prefix (with the same processors), and greedy output with and without
  speculation;
* ``check`` — the law of every sequence of ``new_tokens`` tokens computed
  exactly by enumeration from the target's next-token laws, the engine's
  samples tested against it (``specsim.judge.stats``, stated α and detectable TV),
  and greedy output compared token for token;
* ``hf_assisted`` — HF transformers' assisted generation
  (``generate(..., assistant_model=...)``) with tiny random-weight models.
"""
