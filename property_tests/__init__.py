"""The shipped suites: ``pytest --pyargs property_tests --specsim-device=SPEC``.

- ``test_reference_laws.py`` — L0: the reference's exact laws are lossless.
- ``test_device_exact.py`` — L1: the device emits the reference's tokens given the same noise.
- ``test_bad_input.py`` — SPEC §6: reference and device refuse bad input by name.
- engine suites (``test_engine_*.py``, ``test_scheduler_*.py``): bookkeeping properties.
"""
