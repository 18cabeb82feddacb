"""An in-memory stand-in for the few API calls the barrier makes, with injectable failures.

Used by ``simulate`` and the fault tests (the real client is tested against a local HTTP
server instead). Failures: 409 conflict, 500/503 server errors and timeouts (status 0).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from dra_constructs.agent.backends.simulated import FaultInjector
from dra_constructs.agent.kube import ApiError
from dra_constructs.agent.taints import ANNOTATION_PREFIX

__all__ = ["SimulatedKube"]

_STATUSES = (409, 500, 503, 0)


class SimulatedKube:
    """KubeOps over dicts: DeviceTaintRules by name, Events in a list."""

    #: Discovery's answer for devicetaintrules (False: the gate is off).
    serve_taint_rules: bool = True

    def __init__(self, faults: FaultInjector | None = None,
                 on_untaint: Callable[[str], None] | None = None) -> None:
        self.faults = faults or FaultInjector()
        self.rules: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.on_untaint = on_untaint
        self._lock = threading.Lock()

    def _maybe_fail(self, op: str) -> None:
        if self.faults.hit(op):
            status = _STATUSES[int(self.faults.uniform_draw() * len(_STATUSES)) % len(_STATUSES)]
            raise ApiError(status, f"injected failure of {op}")

    def apply_taint_rule(self, body: dict[str, Any]) -> None:
        self._maybe_fail("kube.apply")
        with self._lock:
            self.rules[body["metadata"]["name"]] = body

    def delete_taint_rule(self, api_version: str, name: str) -> None:
        self._maybe_fail("kube.delete")
        with self._lock:
            body = self.rules.pop(name, None)
        if body is not None and self.on_untaint is not None:
            self.on_untaint(body["metadata"]["annotations"][f"{ANNOTATION_PREFIX}/device"])

    def post_event(self, body: dict[str, Any]) -> None:
        self._maybe_fail("kube.event")
        with self._lock:
            self.events.append(body)

    def serves(self, api_version: str, resource: str) -> bool:
        return resource != "devicetaintrules" or self.serve_taint_rules

    def list_taint_rules(self, api_version: str, label_selector: str) -> list[dict[str, Any]]:
        self._maybe_fail("kube.list")
        wanted = dict(term.split("=", 1) for term in label_selector.split(",") if term)
        with self._lock:
            return [body for body in self.rules.values()
                    if all(body["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())]

    def tainted(self, device: str) -> dict[str, Any] | None:
        """The rule tainting ``device``, if any."""
        with self._lock:
            for body in self.rules.values():
                if body["metadata"]["annotations"].get(f"{ANNOTATION_PREFIX}/device") == device:
                    return body
        return None
