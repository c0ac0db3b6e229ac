"""The run machinery: every group in run order (``registry``), in-process runs and the verdict gate (``runner``),
the ``conformance.json`` document (``document``), atomic writes (``files``), one check alone (``one_check``, for
``specsim replay``), isolated runs (``isolation``) and progress lines (``progress``).

It may import every room below it: ``verdict``, ``checks``, ``stats``, ``cases``, ``core``.
"""
