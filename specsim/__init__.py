"""specsim: the simulated engine, the testing toolkit and the ``specsim`` command.

The layers (see README): ``reference`` is the ground truth (numpy only),
``devices`` the implementations held to it, ``specsim`` the engine, the
conformance runner and the statistics, ``property_tests`` the shipped suites,
``reports`` the renderers.
"""

__version__ = "0.1.0"
