"""How one observation is judged.

* ``compare`` — L1: a device's tokens against the reference's under the same noise, token for token,
  with the failure line that says where, by how much and how to reproduce;
* ``allowances`` — the near-tie allowances of SPEC §9 that ``compare`` re-walks on the rows the step read;
* ``reference_device`` — the reference behind the device protocol (the oracle of property tests and the engine);
* ``stats`` — L3: calibrated goodness-of-fit tests with stated α and detectable TV.

Which observations a run makes, and under which statistical plan, is ``specsim.conformance``.
"""
