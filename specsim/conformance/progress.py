"""A one-line progress bar for long conformance runs, on a terminal only.

It writes to stderr, redraws in place with ``\\r``, and stays silent when
stderr is not a terminal (CI logs, pipes, files): a log full of carriage
returns helps nobody, and stdout stays free for the result table.
``SPECSIM_PROGRESS=0`` silences it on a terminal too; ``=1`` forces it on.

Example (on a terminal)::

    bar = Progress(total=3)
    bar.start("L1-injected")   # [--------]  0/3  L1-injected  0s
    bar.done("pass")           # [###-----]  1/3  ...
    bar.close()
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO


def wanted(stream: TextIO) -> bool:
    """Whether to draw: ``SPECSIM_PROGRESS`` if set, else whether ``stream`` is a terminal."""
    forced = os.environ.get("SPECSIM_PROGRESS")
    if forced:  # set and non-empty
        return forced not in ("0", "false", "no")
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # closed or fake stream
        return False


class Progress:
    """Progress over ``total`` units (groups), with the current one's name and elapsed time."""

    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool | None = None, width: int = 24):
        self.total = max(int(total), 0)
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = wanted(self.stream) if enabled is None else enabled
        self.width = width
        self.finished = 0
        self.label = ""
        self.tally: dict[str, int] = {}
        self._started = time.monotonic()
        self._unit_started = self._started
        self._last_len = 0

    def start(self, label: str) -> None:
        """A new unit begins."""
        self.label = label
        self._unit_started = time.monotonic()
        self.draw()

    def tick(self) -> None:
        """Redraw (the elapsed time moves on while a unit runs)."""
        self.draw()

    def done(self, outcome: str = "") -> None:
        """The current unit finished; ``outcome`` is counted in the tally shown."""
        self.finished += 1
        if outcome:
            self.tally[outcome] = self.tally.get(outcome, 0) + 1
        self.draw()

    def skip(self, n: int = 1) -> None:
        """Units already finished (a resumed run)."""
        self.finished += n
        self.tally["resumed"] = self.tally.get("resumed", 0) + n

    def line(self) -> str:
        frac = self.finished / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        unit_s = time.monotonic() - self._unit_started
        tally = " ".join(f"{k}:{v}" for k, v in sorted(self.tally.items()))
        return f"[{bar}] {self.finished}/{self.total}  {self.label}  {unit_s:.0f}s  {tally}".rstrip()

    def draw(self) -> None:
        if not self.enabled:
            return
        text = self.line()
        pad = max(self._last_len - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._last_len = len(text)

    def close(self) -> None:
        """Clear the line so the next output starts clean."""
        if self.enabled and self._last_len:
            self.stream.write("\r" + " " * self._last_len + "\r")
            self.stream.flush()
            self._last_len = 0
