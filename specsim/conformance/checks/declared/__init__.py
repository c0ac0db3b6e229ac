"""The declared area: L1-declared and L3-declared, a device held to the limits it declares.

It imports ``stats``, ``cases`` and ``core``; no other area of ``checks``.
"""
