"""Implementations held to ``reference/SPEC.md`` through ``devices.protocol``.

Devices never import ``reference``: a device checked against itself proves nothing.
"""
