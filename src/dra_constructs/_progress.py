"""A one-line progress indicator on stderr for long runs (``audit``, ``fit``); pure Python.

It writes only when enabled and the stream is a terminal: piped, redirected or ``--quiet`` runs
print nothing, so stderr stays the place for errors. Updates are throttled (at most one per
``interval`` seconds) and the line is cleared when the run ends, before the report is written.
"""

from __future__ import annotations

import sys
import time
from typing import IO

__all__ = ["Progress"]


class Progress:
    """``label: 12,000 / 200,000 objects`` redrawn in place with a carriage return."""

    def __init__(self, *, enabled: bool = True, stream: IO[str] | None = None, interval: float = 0.2) -> None:
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.active = bool(enabled and self.stream is not None and callable(isatty) and isatty())
        self.interval = interval
        self._label = ""
        self._width = 0
        self._last = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.done()  # also when the run fails: the error line starts on a clean line

    def step(self, label: str) -> None:
        """Start a phase (shown at once)."""
        self._label = label
        self._draw(label)

    def update(self, done: int, total: int | None = None, unit: str = "objects") -> None:
        """``done`` of ``total`` ``unit`` in the current phase (drawn at most every ``interval`` s)."""
        if not self.active:
            return
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        counted = f"{done:,} / {total:,}" if total is not None else f"{done:,}"
        self._draw(f"{self._label}: {counted} {unit}", now)

    def done(self) -> None:
        """Clear the line (before the report is written)."""
        if self.active and self._width:
            self._write("\r" + " " * self._width + "\r")
            self._width = 0

    def _draw(self, text: str, now: float | None = None) -> None:
        if not self.active:
            return
        self._last = now if now is not None else time.monotonic()
        text = "dra-constructs: " + text
        self._write("\r" + text.ljust(self._width))
        self._width = max(self._width, len(text))

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal: progress is never worth an error
            self.active = False
