"""An Event per device state transition, so ``kubectl get events`` tells each device's history.

The guard calls :meth:`Lifecycle.note` whenever it sets a device's taint value (``in-use``,
``sanitizing``, ``quarantined``) or removes it after a verify that passed (``available``),
on every target: on 1.32, where no DeviceTaintRule exists, the Events are the only place the
cluster shows the state. Each *change* posts one Event about the Node naming the device
(message ``<device>: <from> -> <to>[: detail]``):

- to ``in-use``: ``DeviceInUse`` (Normal);
- to ``sanitizing``: ``DeviceSanitizing`` (Normal);
- to ``available`` (the rule removed after a passed verify): ``DeviceReleased`` (Normal);
- to ``quarantined``: nothing here, the barrier posts ``DeviceQuarantined`` (Warning) with the
  reason; a re-applied quarantine posts nothing.

Deduplicated: a value set again (the agent re-applies taints every reconcile) posts nothing.
The last value per device starts from the persisted state (:func:`seed_from_phases`), so an
agent restart does not re-announce every device. Rate-limited per device (a token bucket of
:data:`BURST` Events, one more every :data:`REFILL_S` seconds): a device that flaps
(sanitize, fail, retry) cannot flood the namespace; a transition not posted is counted and
the next Event says how many were left out; ``dra_sanitizer_lifecycle_events_total{reason,
outcome}`` counts them (posted, failed, rate-limited). Events are history: the current state is the
DeviceTaintRule (no rule: available). Best effort: a failed post is logged by the guard, never
holds the barrier.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from dra_constructs.agent.clock import Clock
from dra_constructs.agent.state import DeviceState, Phase

__all__ = ["BURST", "REASONS", "REFILL_S", "Lifecycle", "seed_from_phases"]

#: Event reason (and whether it is a Warning) per state this module announces.
REASONS: dict[str, tuple[str, bool]] = {
    "in-use": ("DeviceInUse", False),
    "sanitizing": ("DeviceSanitizing", False),
    "available": ("DeviceReleased", False),
}
#: States tracked (for deduplication) but announced elsewhere: the barrier's DeviceQuarantined.
_SILENT = frozenset({"quarantined"})
BURST = 6          # two whole claim lifecycles at once
REFILL_S = 30.0    # then one transition Event per 30 s per device

#: Persisted phase -> the state the previous agent last announced for it.
_PHASE_STATE = {Phase.ALLOCATED: "in-use", Phase.DIRTY: "in-use", Phase.CLEAN: "available",
                Phase.QUARANTINED: "quarantined"}

Post = Callable[[str, str, str, Clock, bool], bool]
#: (reason, outcome): outcome ``posted``, ``failed`` (the API refused it) or ``rate-limited``.
Count = Callable[[str, str], None]


def seed_from_phases(states: Iterable[DeviceState]) -> dict[str, str]:
    """Device -> last announced state, from the state files (mid-barrier phases: ``sanitizing``)."""
    return {s.device: _PHASE_STATE.get(s.phase, "sanitizing") for s in states if s.phase is not Phase.UNKNOWN}


class Lifecycle:
    """Posts one Event per state change of a device, deduplicated and rate-limited."""

    def __init__(self, post: Post, seed: dict[str, str] | None = None, *, burst: int = BURST,
                 refill_s: float = REFILL_S, count: Count | None = None) -> None:
        self._post = post
        self._count: Count = count or (lambda _reason, _outcome: None)
        self._last: dict[str, str] = dict(seed or {})
        self._tokens: dict[str, tuple[float, float]] = {}  # device -> (tokens, at monotonic time)
        self._suppressed: dict[str, int] = {}
        self._burst, self._refill = float(burst), refill_s
        self._lock = threading.Lock()

    def state(self, device: str) -> str | None:
        """The last state noted for ``device``."""
        with self._lock:
            return self._last.get(device)

    def note(self, device: str, state: str, clock: Clock, detail: str | None = None) -> bool:
        """Record that ``device`` is now in ``state``; True if an Event was posted."""
        with self._lock:
            previous = self._last.get(device)
            if previous == state or (state not in REASONS and state not in _SILENT):
                return False
            self._last[device] = state
            if state in _SILENT:
                return False
            reason, warning = REASONS[state]
            if not self._take(device, clock.monotonic()):
                self._suppressed[device] = self._suppressed.get(device, 0) + 1
                self._count(reason, "rate-limited")
                return False
            left_out = self._suppressed.pop(device, 0)
        message = f"{previous or 'unknown'} -> {state}" + (f": {detail}" if detail else "")
        if left_out:
            message += f" ({left_out} earlier transition(s) not posted: rate limit)"
        posted = self._post(device, reason, message, clock, warning)
        self._count(reason, "posted" if posted else "failed")
        return posted

    def _take(self, device: str, now: float) -> bool:
        tokens, at = self._tokens.get(device, (self._burst, now))
        tokens = min(self._burst, tokens + max(0.0, now - at) / self._refill)
        if tokens < 1.0:
            self._tokens[device] = (tokens, now)
            return False
        self._tokens[device] = (tokens - 1.0, now)
        return True
