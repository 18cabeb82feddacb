"""The guard: what keeps a device away from the scheduler while it is not proven clean.

Targets with DeviceTaintRule (1.33+, with the ``DRADeviceTaintRules`` gate on where it is not
GA): one rule per device, effect ``NoSchedule`` by default, placed when the device is allocated
(value ``in-use``), kept through the barrier (``sanitizing``), turned into ``quarantined`` on
failure and deleted only after a verify that passed.

DynamicMIG (partitionable devices): every placement of a GPU is a device, and a freed
placement's memory slices are shared with every placement that overlaps them. So a guard on a
placement also taints each overlapping placement (value ``overlap``), and removing it deletes
only the rules of placements that overlap no other held device (:attr:`Guard.overlaps`,
:attr:`Guard.held`, set by the runtime). The scheduler then cannot hand the device
to anyone between the tenant's deallocation and the end of the barrier.

Targets without it (1.32, or a server whose discovery does not list ``devicetaintrules``, i.e.
the gate is off): **nothing stops the scheduler from allocating the device to a new claim while it is
being sanitized or is quarantined.** What remains, and what the agent does:
- when the last pod using the device starts terminating, the agent sets NVML compute mode
  ``PROHIBITED`` on it (GPU, or MIG from the CUDA 13.3 NVML on; before it compute mode cannot be
  changed on MIG, see docs "MIG without compute mode"), so no new CUDA context can be created from then on:
  a new tenant's pod can be scheduled and started but cannot use the GPU until the barrier
  releases it (its CUDA calls fail; it sees no memory);
- the barrier keeps ``PROHIBITED`` (``EXCLUSIVE_PROCESS`` while its own context exists) and
  sets ``DEFAULT`` only after a passed verify; a quarantined device stays ``PROHIBITED``;
- the window that remains: from the moment the device is deallocated until the agent has set
  ``PROHIBITED``, when the agent missed the pod's termination (agent down or restarting, a
  force-deleted pod with no grace period, or NVML refusing the compute-mode change). A new
  tenant that creates a context inside that window can read what the previous tenant left in
  memory the driver did not scrub (scrub-on-free off). It is never killed for that (only the
  released claim's pods are signalled): the agent, comparing the stored claim with the live one
  (:mod:`.turnover`), records the missed turnover (evidence ``missed-turnover``, Event, metric)
  and the next release runs the whole barrier. Each such cycle's evidence says ``taint: none``
  and ``compute_mode_guard: false``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from dra_constructs.agent.clock import Clock
from dra_constructs.agent.devices import DRIVER
from dra_constructs.agent.kube import ApiError, KubeOps, retrying
from dra_constructs.agent.lifecycle import Lifecycle
from dra_constructs.agent.taints import device_labels, taint_rule, taint_rule_name
from dra_constructs.target import Target

__all__ = ["Guard", "GuardError"]

_LOG = logging.getLogger("dra_sanitizer.guard")


class GuardError(Exception):
    """The API would not take the taint change, even after the retries."""


class Guard:
    """Places, updates and removes the per-device DeviceTaintRule, and posts Events."""

    def __init__(
        self,
        kube: KubeOps | None,
        target: Target,
        node: str,
        *,
        key: str,
        effect: str,
        retries: int,
        backoff_s: float,
        event_namespace: str = "default",
        driver: str = DRIVER,
    ) -> None:
        self._kube = kube
        self.driver = driver  # the DRA driver of the devices its rules select (gpu.nvidia.com, gpu.amd.com)
        self.target = target
        self.node = node
        self.key = key
        self.effect = effect
        self._retries = retries
        self._backoff = backoff_s
        self._event_namespace = event_namespace
        self._missing_api = False
        #: Serializes taint/untaint: untaint's "does any overlap still need this rule?" and its
        #: deletes must not interleave with an allocation tainting the same overlap (DynamicMIG).
        self._rules_lock = threading.RLock()
        #: DynamicMIG: the placements overlapping a device (without itself), and whether a device
        #: is held (not proven clean: allocated, mid-barrier, quarantined, unknown).
        self.overlaps: Callable[[str], list[str]] = lambda _device: []
        self.held: Callable[[str], bool] = lambda _device: False
        #: An Event per state change of a device (:mod:`.lifecycle`); the runtime seeds it from the
        #: state files. Noted for the device a call names, never for the overlaps it also taints.
        self.lifecycle = Lifecycle(self.event)
        if kube is not None and target.device_taint_rule_api_version is not None:
            taint_rule(target, node, "probe", key=key, effect=effect, value="in-use")  # validates the effect

    @property
    def has_taints(self) -> bool:
        """True if device taints can guard devices here (target has the kind, server serves it)."""
        return (self._kube is not None and self.target.device_taint_rule_api_version is not None
                and not self._missing_api)

    def describe(self, device: str) -> str:
        """The guard in words, for evidence records."""
        if self.has_taints:
            return f"DeviceTaintRule {self.target.device_taint_rule_api_version} {taint_rule_name(self.node, device)}"
        if self._kube is None:
            return "none: no Kubernetes API configured (compute mode only)"
        if self._missing_api:
            return "none: the API server does not serve devicetaintrules (gate off?); compute mode only"
        return f"none: Kubernetes {self.target} has no DeviceTaintRule; compute mode only"

    def taint(self, device: str, value: str, clock: Clock, reason: str | None = None) -> bool:
        """Ensure the device's rule exists with taint value ``value``; False if no taint API.

        The device is in state ``value`` whether or not the taint could be placed (the barrier
        goes on without it): the lifecycle Event is posted either way, after the attempt.
        """
        try:
            return self._taint(device, value, clock, reason)
        finally:
            self.lifecycle.note(device, value, clock, reason)

    def _taint(self, device: str, value: str, clock: Clock, reason: str | None) -> bool:
        if not self.has_taints:
            return False
        with self._rules_lock:
            ok = self._apply(device, value, clock, reason)
            for other in self.overlaps(device):
                if not self.held(other):  # a held one keeps its own value (in-use, quarantined, ...)
                    ok = self._apply(other, "overlap", clock, f"overlaps {device}") and ok
            return ok

    def _apply(self, device: str, value: str, clock: Clock, reason: str | None) -> bool:
        assert self._kube is not None
        body = taint_rule(self.target, self.node, device, key=self.key, effect=self.effect, value=value,
                          reason=reason, driver=self.driver)
        return self._do(lambda: self._kube.apply_taint_rule(body) if self._kube else None, clock, device)

    def untaint(self, device: str, clock: Clock) -> bool:
        """Delete the device's rule (gone already is fine); False if no taint API.

        Only a removal that did not raise announces the device ``available`` (DeviceReleased).
        """
        ok = self._untaint(device, clock)
        self.lifecycle.note(device, "available", clock)
        return ok

    def _untaint(self, device: str, clock: Clock) -> bool:
        if not self.has_taints:
            return False
        with self._rules_lock:  # callers record "held" (the state file) before they taint
            others = self.overlaps(device)
            ok = True
            if not any(self.held(o) for o in others):
                ok = self._delete(device, clock)
            for other in others:
                if not self.held(other) and not any(self.held(o) for o in self.overlaps(other) if o != device):
                    ok = self._delete(other, clock) and ok
            return ok

    def _delete(self, device: str, clock: Clock) -> bool:
        api_version = self.target.device_taint_rule_api_version
        assert self._kube is not None and api_version is not None
        name = taint_rule_name(self.node, device)
        return self._do(lambda: self._kube.delete_taint_rule(api_version, name) if self._kube else None,
                        clock, device)

    def _do(self, call: Callable[[], Any], clock: Clock, device: str) -> bool:
        try:
            retrying(call, clock, self._retries, self._backoff)
        except ApiError as error:
            if error.status == 404 and not self._served(clock):
                # Discovery says the kind is not served (DRADeviceTaintRules gate off): fall back, loudly.
                _LOG.error("devicetaintrules not served by the API server (%s); guarding %s by compute mode only",
                           error, device)
                self._missing_api = True
                return False
            # A 404 of one object (deleted meanwhile) is not a missing API: the caller retries.
            raise GuardError(f"DeviceTaintRule for {device}: {error}") from error
        return True

    def _served(self, clock: Clock) -> bool:
        """Discovery of ``devicetaintrules`` in the target's group version; unsure (an error): served."""
        api_version = self.target.device_taint_rule_api_version
        kube = self._kube
        assert kube is not None and api_version is not None
        try:
            return retrying(lambda: kube.serves(api_version, "devicetaintrules"), clock, self._retries, self._backoff)
        except ApiError as error:
            _LOG.warning("discovery of devicetaintrules failed (%s): assuming they are served", error)
            return True

    def _involved_node(self) -> dict[str, str]:
        """The Node as the Event's object. The API server accepts an Event about a cluster-scoped
        object only in ``default`` unless ``involvedObject.namespace`` names the Event's namespace
        (``pkg/apis/core/validation/events.go``, legacyValidateEvent: "does not match event.namespace").
        """
        node = {"apiVersion": "v1", "kind": "Node", "name": self.node}
        if self._event_namespace not in ("", "default"):
            node["namespace"] = self._event_namespace
        return node

    def event(self, device: str, reason: str, message: str, clock: Clock, warning: bool = True) -> bool:
        """Post an Event about the node naming the device; best effort (False if it failed)."""
        if self._kube is None:
            return False
        stamp = datetime.fromtimestamp(clock.wall(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"dra-sanitizer-{device}-", "namespace": self._event_namespace,
                         "labels": device_labels(self.node, device)},
            "involvedObject": self._involved_node(),
            "reason": reason,
            "message": f"{device}: {message}"[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": "dra-sanitizer", "host": self.node},
            "reportingComponent": "dra-sanitizer",
            "reportingInstance": self.node,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        kube = self._kube
        try:
            retrying(lambda: kube.post_event(body), clock, self._retries, self._backoff)
        except ApiError as error:
            _LOG.warning("cannot post event %s for %s: %s", reason, device, error)
            return False
        return True
