"""Files a reader may open at any moment: written whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile


def write_json_atomic(path: str, doc: dict) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, default=float)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report is for reading
    os.replace(tmp, path)
