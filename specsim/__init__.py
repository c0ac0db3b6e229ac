"""specsim: the reference and conformance kit for speculative decoding.

The repository's layers: ``reference`` is the ground truth (numpy only), ``devices`` the
implementations held to it, ``specsim`` everything that holds them (its rooms are drawn in
docs/architecture.md), ``property_tests`` the shipped pytest suites, ``reports`` the renderers.
"""

__version__ = "0.1.0"
