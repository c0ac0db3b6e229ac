"""The verdict of SPEC §10 and a vendor's expected failures: profiles (the core's evidence, the gate),
waivers (the file format) and ``conform_waivers`` (applying a file to a run).

It imports ``checks``, ``stats``, ``cases`` and ``core``; never ``run``.
"""
