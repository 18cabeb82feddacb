"""Clocks: the real one, and a virtual one so tests and ``simulate`` spend no wall time waiting."""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["Clock", "RealClock", "VirtualClock"]


class Clock(Protocol):
    """What the barrier needs from time: a monotonic reading, a sleep and the wall time."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def wall(self) -> float: ...


class RealClock:
    """``time.monotonic`` / ``time.sleep`` / ``time.time``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wall(self) -> float:
        return time.time()


class VirtualClock:
    """Time that only moves when someone sleeps: a 30 s grace period costs no wall time."""

    def __init__(self, start: float = 0.0, wall_start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_start - start
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)

    def wall(self) -> float:
        with self._lock:
            return self._now + self._wall_offset
