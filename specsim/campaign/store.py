"""Finished shards on disk: one JSON each, written atomically, read back on resume.

Layout under the campaign's directory::

    DIR/shards/campaign.json              what the campaign is (its key) and how it ran
    DIR/shards/<seed>/<case>/<index>.json one finished shard: its task, counts, time, worker

(under ``shards/``, so that ``DIR`` holds only the reports' inputs: ``conformance.json`` and the like).

A shard file appears whole or not at all (written to a temporary file and
renamed), so a campaign killed at any moment resumes from the shards whose
files exist, and a shard is never counted twice: a file is keyed by its
shard, and the merge reads each key once.
"""

from __future__ import annotations

import json
import os

from specsim.conformance.run.files import write_json_atomic


class ResumeMismatch(ValueError):
    """The directory holds a different campaign (device, profile, seeds, α, quick or shard size differ)."""


class ShardStore:
    """The shard files of one campaign directory (``None``: keep nothing on disk)."""

    def __init__(self, directory: str | None, key: dict, resume: bool):
        self.directory = directory
        self.key = key
        if directory is None:
            return
        manifest = os.path.join(directory, "shards", "campaign.json")
        if resume and os.path.exists(manifest):
            with open(manifest) as f:
                found = json.load(f).get("key")
            if found != key:
                differ = sorted(k for k in set(key) | set(found or {}) if (found or {}).get(k) != key.get(k))
                raise ResumeMismatch(f"--resume: {directory} holds another campaign (differs in {', '.join(differ)})")
        write_json_atomic(manifest, {"key": key, "complete": False})

    def path(self, task) -> str:
        return os.path.join(self.directory, "shards", str(task.suite_seed), task.case_id, f"{task.index}.json")

    def finished(self, task) -> dict | None:
        """The stored result of ``task``, or None if it has not finished."""
        if self.directory is None:
            return None
        try:
            with open(self.path(task)) as f:
                doc = json.load(f)
        except FileNotFoundError:
            return None
        return doc["result"] if doc.get("task") == task.to_json() else None

    def save(self, task, result: dict) -> None:
        if self.directory is not None:
            write_json_atomic(self.path(task), {"task": task.to_json(), "result": result})

    def close(self, run: dict) -> None:
        """Mark the campaign complete, with how it ran."""
        if self.directory is not None:
            write_json_atomic(os.path.join(self.directory, "shards", "campaign.json"),
                              {"key": self.key, "complete": True, "run": run})
