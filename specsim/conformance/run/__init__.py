"""The run machinery: the group registry, in-process runs and the ``conformance.json`` document (``runner``),
one check alone (``one_check``, for ``specsim replay``), isolated runs (``isolation``) and progress lines.

It may import every room below it: ``verdict``, ``checks``, ``stats``, ``cases``, ``core``.
"""
