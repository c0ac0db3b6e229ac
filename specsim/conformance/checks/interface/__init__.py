"""The interface area: input rules (what a device must refuse) and capabilities (a device held to what it
declares, both ways).

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""
