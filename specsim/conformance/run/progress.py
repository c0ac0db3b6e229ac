"""Progress of a long conformance run on stderr: a bar on a terminal, plain lines elsewhere.

On a terminal it draws a one-line bar, redrawn in place with ``\\r``. Off a terminal (CI logs,
pipes, files) it writes plain lines instead — a log full of carriage returns helps nobody, and
a log that stays silent for the twelve minutes of a statistical group looks hung:

* one line per finished group: ``[3/14] L1-sizes  pass 61  19 s``;
* inside a long group, a line at least every ``heartbeat_s`` (30 s) seconds with the time so far
  and, when the group's expected duration is known, an estimate:
  ``[13/14] L3-statistical  running 2 min 30 s (about 12 min expected)``;
* at the end, the run's total: ``14 groups in 23 min: pass 12, fail 2``.

stdout stays free for the result table. ``SPECSIM_PROGRESS=0`` silences it; ``=1`` forces the
bar (even off a terminal); ``=lines`` forces the plain lines (even on a terminal).

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
from typing import Callable, Mapping, TextIO

HEARTBEAT_S = 30.0
"""Off a terminal, the longest silence inside a running group (seconds)."""

STATUS_ORDER = ("error", "fail", "not_supported", "pass")
"""The order of a group's check counts in its line: what needs reading first."""


def mode(stream: TextIO) -> str:
    """How to show progress on ``stream``: ``"bar"``, ``"lines"`` or ``"off"``.

    ``SPECSIM_PROGRESS`` if set (``0``/``false``/``no``: off; ``lines``: lines; anything else: the bar),
    else the bar on a terminal and lines elsewhere."""
    forced = os.environ.get("SPECSIM_PROGRESS")
    if forced:  # set and non-empty
        if forced in ("0", "false", "no"):
            return "off"
        return "lines" if forced == "lines" else "bar"
    return "bar" if _is_terminal(stream) else "lines"


def wanted(stream: TextIO) -> bool:
    """Whether to draw the bar: ``SPECSIM_PROGRESS`` if set, else whether ``stream`` is a terminal."""
    return mode(stream) == "bar"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError):  # closed or fake stream
        return False


def duration(seconds: float) -> str:
    """A duration as a person reads it.

    >>> duration(19.4), duration(150), duration(3720)
    ('19 s', '2 min 30 s', '1 h 02 min')
    """
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def counts_text(counts: Mapping[str, int]) -> str:
    """A group's check counts, worst first, zeros left out.

    >>> counts_text({"pass": 59, "fail": 2, "error": 0})
    'fail 2 pass 59'
    """
    order = [s for s in STATUS_ORDER if s in counts] + sorted(s for s in counts if s not in STATUS_ORDER)
    return " ".join(f"{s} {counts[s]}" for s in order if counts[s])


class Progress:
    """Progress over ``total`` units (groups), with the current one's name and elapsed time.

    - ``stream``: where it writes (default stderr).
    - ``enabled``: True forces the bar, False silences it; None (default) decides by :func:`mode`.
    - ``lines``: True forces the plain lines (overrides ``enabled``).
    - ``expected``: group name → its usual duration in seconds, for the estimate inside a group.
    - ``clock``: seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, total: int, *, stream: TextIO | None = None, enabled: bool | None = None, width: int = 24,
                 lines: bool | None = None, expected: Mapping[str, float] | None = None,
                 clock: Callable[[], float] = time.monotonic, heartbeat_s: float = HEARTBEAT_S):
        self.total = max(int(total), 0)
        self.stream = stream if stream is not None else sys.stderr
        self.mode = self._chosen_mode(enabled, lines)
        self.enabled = self.mode == "bar"
        self.width = width
        self.expected = dict(expected or {})
        self.clock = clock
        self.heartbeat_s = heartbeat_s
        self.finished = 0
        self.label = ""
        self.tally: dict[str, int] = {}
        self._started = clock()
        self._unit_started = self._started
        self._unit_expected: float | None = None
        self._last_written = self._started
        self._last_len = 0

    def _chosen_mode(self, enabled: bool | None, lines: bool | None) -> str:
        if lines:
            return "lines"
        if enabled is None:
            return mode(self.stream)
        return "bar" if enabled else "off"

    def start(self, label: str, expected_s: float | None = None, *, started: float | None = None) -> None:
        """A new unit begins; ``expected_s`` (default: ``expected[label]``) is its usual duration. ``started`` (a
        ``clock`` reading): when the longest-running of the units shown began, where units run side by side."""
        self.label = label
        self._unit_started = self._last_written = self.clock()
        if started is not None:
            self._unit_started = started
        self._unit_expected = expected_s if expected_s is not None else self.expected.get(label)
        self.draw()

    def tick(self) -> None:
        """The unit is still running: redraw the bar, or write a line if ``heartbeat_s`` passed in silence."""
        if self.mode == "lines":
            if self.clock() - self._last_written >= self.heartbeat_s:
                self._write_line(self.running_line())
            return
        self.draw()

    def done(self, outcome: str = "", counts: Mapping[str, int] | None = None, *, label: str | None = None,
             started: float | None = None) -> None:
        """The current unit finished; ``outcome`` (its worst status) is counted in the tally shown,
        ``counts`` (status → number of checks) is written in its line. ``label`` and ``started`` (a ``clock``
        reading): the unit that finished, where units run side by side and it is not the one last started."""
        if label is not None:
            self.label = label
        if started is not None:
            self._unit_started = started
        self.finished += 1
        if outcome:
            self.tally[outcome] = self.tally.get(outcome, 0) + 1
        if self.mode == "lines":
            self._write_line(self.finished_line(outcome, counts))
            return
        self.draw()

    def skip(self, n: int = 1) -> None:
        """Units already finished (a resumed run)."""
        self.finished += n
        self.tally["resumed"] = self.tally.get("resumed", 0) + n
        if self.mode == "lines":
            self._write_line(f"[{self.finished}/{self.total}] {n} group(s) already finished (resumed)")

    # --- the texts

    def _position(self, n: int) -> str:
        return f"[{n}/{self.total}]"

    def finished_line(self, outcome: str, counts: Mapping[str, int] | None) -> str:
        """``[3/14] L1-sizes  pass 61  19 s``."""
        said = counts_text(counts) if counts else ""
        return (f"{self._position(self.finished)} {self.label}  {said or outcome or 'done'}  "
                f"{duration(self.clock() - self._unit_started)}")

    def running_line(self) -> str:
        """``[13/14] L3-statistical  running 2 min 30 s (about 12 min expected)``."""
        spent = self.clock() - self._unit_started
        estimate = ""
        if self._unit_expected:
            left = self._unit_expected - spent
            estimate = (f" (about {duration(self._unit_expected)} expected)" if left > 0
                        else f" (past its usual {duration(self._unit_expected)})")
        return f"{self._position(self.finished + 1)} {self.label}  running {duration(spent)}{estimate}"

    def summary_line(self) -> str:
        """``14 groups in 23 min: pass 12, fail 2``."""
        tally = ", ".join(f"{k} {v}" for k, v in sorted(self.tally.items()))
        return f"{self.finished} group(s) in {duration(self.clock() - self._started)}" + (f": {tally}" if tally else "")

    def line(self) -> str:
        frac = self.finished / self.total if self.total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        unit_s = self.clock() - self._unit_started
        tally = " ".join(f"{k}:{v}" for k, v in sorted(self.tally.items()))
        return f"[{bar}] {self.finished}/{self.total}  {self.label}  {unit_s:.0f}s  {tally}".rstrip()

    # --- writing

    def _write_line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_written = self.clock()

    def draw(self) -> None:
        if self.mode != "bar":
            return
        text = self.line()
        pad = max(self._last_len - len(text), 0)
        self.stream.write("\r" + text + " " * pad)
        self.stream.flush()
        self._last_len = len(text)

    def close(self) -> None:
        """Clear the bar so the next output starts clean; off a terminal, write the run's total."""
        if self.mode == "lines" and self.finished:
            self._write_line(self.summary_line())
        if self.mode == "bar" and self._last_len:
            self.stream.write("\r" + " " * self._last_len + "\r")
            self.stream.flush()
            self._last_len = 0
