"""MIG isolation: keep an exclusive-gpu tenant's MIG slices off GPUs another tenant holds.

What MIG does not isolate (timing channels through memory barriers, NVLink contention; see
:mod:`dra_constructs.isolation` and docs/threat-model.md) needs whole physical GPUs per tenant.
The scheduler cannot see "this GPU holds another tenant's slice", so the agent tells it with a
device taint (key ``isolation.dra-constructs.io/gpu``, effect ``NoSchedule``) on every MIG device
of each GPU that holds a slice; for DynamicMIG also on the other placements and the whole
``gpu-N``. Each GPU's value follows from who holds it:

- a claim is *exclusive* when the request its device was allocated for tolerates the isolation
  taint with its own namespace as value (what ``GpuTenant(mig_isolation="exclusive-gpu")``
  renders and the guardrails demand of such a tenant); tenant = namespace;
- holders: the live claims of the GPU's devices, plus the tenant stored for each of its devices
  still mid-barrier or quarantined (the released tenant's processes may still run until the drain
  ends: the taint is removed only after the barrier);
- one exclusive tenant alone: value = that namespace; shared tenants only: ``Shared`` (only with
  ``mig_isolation`` on, which every shared tenant's toleration then answers); an exclusive tenant
  beside any other: ``Conflict``, tolerated by nobody, and the breach is reported (Warning Event
  ``IsolationBreached``, metric ``dra_sanitizer_isolation_breaches_total``, error log). Nothing is
  killed: which of the two allocations "won" is not the agent's to decide (fail closed: it keeps
  every guard and kills nothing it is not sure of); the GPU takes nobody new until they are gone.

A stored tenant whose level the agent has not seen (an agent restart mid-barrier) counts as
exclusive: the strictest value, dropped when its barrier ends. A device whose state file is
corrupt or unreadable counts as held by an unknown exclusive tenant (``Unknown``, a value no
namespace can be, so nobody tolerates it; review finding 4): whoever held it may still run there,
and the barrier (which treats the device as ``unknown``) rewrites the state; beside real tenants
it makes the value ``Conflict`` without a breach report (no allocation raced anything).
Off (``mig_isolation: false``, the default), the agent places no ``Shared`` taints; an exclusive
claim still gets its GPU tainted (it asked for it) and the agent warns once that other tenants'
GPUs are not closed to it.

Rules are named ``dra-isolation-<node>-<device>`` (hashed when long), one per device, applied when
a value changes; a failed call is retried at the next reconcile. The first reconcile after
start deletes the rules of devices that need none (left by an earlier run). A rule deleted by hand
(review finding 5) is found at the next reconcile (the agent's tick, every
``reconcile_interval_s``): where the API can list the node's isolation rules
(``KubeOps.list_taint_rules``), each applied rule missing from that list, or with another value, is
applied again and a Warning Event ``IsolationTaintRestored`` names it; a list that fails is logged
and retried at the next reconcile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from dra_constructs.agent.clock import Clock
from dra_constructs.agent.devices import DRIVER, DeviceInfo
from dra_constructs.agent.kube import ApiError, KubeOps, retrying
from dra_constructs.agent.state import Phase, StateStore
from dra_constructs.agent.taints import ANNOTATION_PREFIX, MANAGED_BY, rule_name, taint_rule
from dra_constructs.isolation import CONFLICT_VALUE, ISOLATION_TAINT_KEY, gpu_taint_value
from dra_constructs.target import Target

__all__ = ["EFFECT", "UNKNOWN_TENANT", "GpuHolders", "Isolation", "exclusive_claim", "isolation_rule_name"]

_LOG = logging.getLogger("dra_sanitizer.isolation")
EFFECT = "NoSchedule"  # keeps new allocations away; evicts nobody
#: Phases whose stored tenant still holds the GPU when no live claim does (released, barrier pending or
#: running, quarantined): its processes may run until the drain ends.
_LINGERING = frozenset(Phase) - {Phase.CLEAN, Phase.UNKNOWN}

Event = Callable[[str, str, str, Clock, bool], bool]
#: The tenant of a device whose state file is corrupt: capitalised, so no namespace (a DNS label) is it.
UNKNOWN_TENANT = "Unknown"


def isolation_rule_name(node: str, device: str) -> str:
    """``dra-isolation-<node>-<device>`` (:func:`.taints.rule_name`)."""
    return rule_name("dra-isolation", node, device)


def _request_tolerations(spec: Mapping[str, Any], request: str) -> list[Mapping[str, Any]]:
    """Tolerations of ``request`` (``name`` or ``name/sub``) in a claim spec of any version."""
    base, _, sub = request.partition("/")
    for raw in (spec.get("devices") or {}).get("requests") or []:
        if not isinstance(raw, Mapping) or raw.get("name") != base:
            continue
        if sub:
            for alternative in raw.get("firstAvailable") or []:
                if isinstance(alternative, Mapping) and alternative.get("name") == sub:
                    return list(alternative.get("tolerations") or [])
            return []
        exactly = raw.get("exactly")
        body: Mapping[str, Any] = exactly if isinstance(exactly, Mapping) else raw  # v1/v1beta2 vs v1beta1
        return list(body.get("tolerations") or [])
    return []


def exclusive_claim(claim: Mapping[str, Any], request: str | None) -> bool:
    """Whether ``request`` of ``claim`` tolerates the isolation taint of the claim's own namespace."""
    namespace = (claim.get("metadata") or {}).get("namespace")
    if not namespace or not request:
        return False
    return any(t.get("key") == ISOLATION_TAINT_KEY and t.get("operator", "Equal") == "Equal"
               and t.get("value") == namespace
               for t in _request_tolerations(claim.get("spec") or {}, request))


def _stored_namespaces(tenant_namespace: str | None, claims: str | None) -> set[str]:
    """Every namespace a device's stored state names: its tenant and each ``ns/name`` of its claims.

    A device shared by claims of two namespaces stores no ``tenant_namespace`` (the barrier's
    :meth:`.Barrier.mark_allocated`), yet both tenants' processes may run until its drain ends.
    """
    found = {tenant_namespace} if tenant_namespace else set()
    for entry in (claims or "").split(", "):
        namespace, slash, _name = entry.partition("/")
        if slash and namespace:
            found.add(namespace)
    return found


@dataclass(frozen=True)
class GpuHolders:
    """Who holds one physical GPU: namespace -> exclusive, live (claims) and lingering (barriers)."""

    live: Mapping[str, bool]
    lingering: Mapping[str, bool]

    @property
    def tenants(self) -> dict[str, bool]:
        merged = dict(self.lingering)
        for namespace, exclusive in self.live.items():
            merged[namespace] = merged.get(namespace, False) or exclusive
        return merged

    def value(self, shared_taints: bool) -> str | None:
        """The GPU's taint value (None: no taint)."""
        return gpu_taint_value(self.tenants, shared_taints)


class Isolation:
    """Places, changes and removes the isolation DeviceTaintRules of one node's GPUs."""

    def __init__(self, kube: KubeOps | None, target: Target, node: str, *, inventory: dict[str, DeviceInfo],
                 store: StateStore, event: Event, registry: CollectorRegistry, shared_taints: bool,
                 retries: int, backoff_s: float) -> None:
        self._kube = kube
        self.target = target
        self.node = node
        self._inventory = inventory
        self._store = store
        self._event = event
        self.shared_taints = shared_taints
        self._retries, self._backoff = retries, backoff_s
        self._lock = threading.Lock()
        self._applied: dict[str, str] = {}   # device -> value of its rule (as the API last took it)
        self._levels: dict[str, bool] = {}   # namespace -> exclusive, as last seen on a live claim
        self._reported: dict[str, frozenset[str]] = {}  # gpu uuid -> tenants of the breach reported
        self._swept = False
        self._warned_off = False
        self._corrupt: set[str] = set()  # devices whose unreadable state was logged
        #: Whether the server serves devicetaintrules (the guard's discovery; False: the gate is off).
        self.served: Callable[[], bool] = lambda: True
        self.breaches = Counter("dra_sanitizer_isolation_breaches",
                                "GPUs found holding an exclusive-gpu tenant's MIG slice beside another tenant's "
                                "(allocations that raced the isolation taint): reported, nobody killed.",
                                registry=registry)
        self.conflicts = Gauge("dra_sanitizer_isolation_conflict_gpus",
                               "GPUs whose isolation taint is Conflict (nobody new is allocated there).",
                               registry=registry)
        self.restored = Counter("dra_sanitizer_isolation_taints_restored",
                                "Isolation DeviceTaintRules found deleted or changed by others and applied again.",
                                registry=registry)
        self.failures = Counter("dra_sanitizer_isolation_taint_failures",
                                "Isolation DeviceTaintRule changes the API refused (retried next reconcile).",
                                registry=registry)

    @property
    def active(self) -> bool:
        """The target has DeviceTaintRule, an API is configured and it serves the kind."""
        return self._kube is not None and self.target.device_taint_rule_api_version is not None and self.served()

    # --- who holds what -----------------------------------------------------------------------

    def holders(self, claims: list[dict[str, Any]]) -> dict[str, GpuHolders]:
        """Per GPU UUID (GPUs with MIG devices only): the live and lingering tenants."""
        live: dict[str, dict[str, bool]] = {}
        allocated: set[str] = set()
        for claim in claims:
            meta = claim.get("metadata") or {}
            namespace = meta.get("namespace")
            results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
            for result in results or []:
                if result.get("driver") != DRIVER or result.get("pool") != self.node or result.get("adminAccess"):
                    continue
                device = self._inventory.get(str(result.get("device")))
                if device is None or not namespace:
                    continue
                allocated.add(device.name)
                exclusive = exclusive_claim(claim, result.get("request"))
                self._levels[str(namespace)] = exclusive
                gpu = live.setdefault(device.gpu_uuid, {})
                gpu[str(namespace)] = gpu.get(str(namespace), False) or exclusive
        lingering: dict[str, dict[str, bool]] = {}
        for name, device in list(self._inventory.items()):
            problem = self._store.unreadable(name)
            if problem is not None:  # whoever held it may still run there: fail closed
                lingering.setdefault(device.gpu_uuid, {})[UNKNOWN_TENANT] = True
                if name not in self._corrupt:
                    self._corrupt.add(name)
                    _LOG.warning("%s: state unreadable (%s): its GPU keeps an isolation taint for an unknown "
                                 "tenant until the barrier rewrites the state", name, problem)
                continue
            self._corrupt.discard(name)
            if name in allocated:
                continue
            state = self._store.load(name)
            if state.phase in _LINGERING:
                for ns in _stored_namespaces(state.tenant_namespace, state.claim):
                    lingering.setdefault(device.gpu_uuid, {})[ns] = self._levels.get(ns, True)  # unknown: strictest
        gpus = {d.gpu_uuid for d in self._inventory.values() if d.is_mig}
        return {gpu: GpuHolders(live.get(gpu, {}), lingering.get(gpu, {})) for gpu in gpus}

    # --- reconcile ----------------------------------------------------------------------------

    def reconcile(self, claims: list[dict[str, Any]], clock: Clock) -> dict[str, str | None]:
        """Bring every MIG device's isolation rule to its GPU's value; the values by GPU UUID."""
        if not self.active:
            return {}
        with self._lock:
            by_gpu = self.holders(claims)
            values = {gpu: holders.value(self.shared_taints) for gpu, holders in by_gpu.items()}
            self._report(by_gpu, values, clock)
            self.conflicts.set(sum(1 for v in values.values() if v == CONFLICT_VALUE))
            lost = self._lost(clock)
            for name, device in sorted(self._inventory.items()):
                if device.gpu_uuid not in values:
                    continue
                wanted = values[device.gpu_uuid]
                if wanted is not None and (self._applied.get(name) != wanted or name in lost):
                    if self._apply(device, wanted, by_gpu[device.gpu_uuid], clock) and name in lost:
                        self.restored.inc()
                        message = (f"isolation DeviceTaintRule {isolation_rule_name(self.node, name)} ({lost[name]}) "
                                   f"applied again with value {wanted}: only the agent removes it")
                        _LOG.warning("%s: %s", name, message)
                        self._event(name, "IsolationTaintRestored", message, clock, True)
                elif wanted is None and (name in self._applied or not self._swept):
                    self._delete(name, clock)
            self._swept = True
            return values

    def _lost(self, clock: Clock) -> dict[str, str]:
        """Applied rules the API no longer has as applied (deleted or edited by hand): device -> what changed.

        One LIST of the agent's isolation rules by label; a failed list finds nothing (retried next time).
        """
        api_version = self.target.device_taint_rule_api_version
        kube = self._kube
        if not self._applied or kube is None or api_version is None:
            return {}
        selector = f"app.kubernetes.io/managed-by={MANAGED_BY},{ANNOTATION_PREFIX}/purpose=isolation"
        try:
            rules = retrying(lambda: kube.list_taint_rules(api_version, selector), clock, self._retries,
                             self._backoff)
        except ApiError as error:
            _LOG.error("cannot list the isolation taint rules (a rule deleted by hand is found next time): %s", error)
            return {}
        present = {str((r.get("metadata") or {}).get("name")): ((r.get("spec") or {}).get("taint") or {}).get("value")
                   for r in rules}
        lost: dict[str, str] = {}
        for name, value in self._applied.items():
            rule = isolation_rule_name(self.node, name)
            if rule not in present:
                lost[name] = "deleted"
            elif present[rule] != value:
                lost[name] = f"value changed to {present[rule]}"
        return lost

    def _apply(self, device: DeviceInfo, value: str, holders: GpuHolders, clock: Clock) -> bool:
        assert self._kube is not None
        who = ", ".join(sorted(holders.tenants)) or "nobody"
        body = taint_rule(self.target, self.node, device.name, key=ISOLATION_TAINT_KEY, effect=EFFECT, value=value,
                          reason=f"MIG isolation: GPU {device.gpu_uuid} held by {who}")
        body["metadata"]["name"] = isolation_rule_name(self.node, device.name)
        body["metadata"]["labels"][f"{ANNOTATION_PREFIX}/purpose"] = "isolation"
        kube = self._kube
        if self._call(lambda: kube.apply_taint_rule(body), clock, device.name):
            self._applied[device.name] = value
            return True
        return False

    def _delete(self, name: str, clock: Clock) -> None:
        api_version = self.target.device_taint_rule_api_version
        kube = self._kube
        assert kube is not None and api_version is not None
        rule = isolation_rule_name(self.node, name)
        if self._call(lambda: kube.delete_taint_rule(api_version, rule), clock, name):
            self._applied.pop(name, None)

    def _call(self, call: Callable[[], Any], clock: Clock, device: str) -> bool:
        try:
            retrying(call, clock, self._retries, self._backoff)
        except ApiError as error:
            self.failures.inc()
            _LOG.error("isolation taint of %s: %s (retried at the next reconcile)", device, error)
            return False
        return True

    def _report(self, by_gpu: dict[str, GpuHolders], values: dict[str, str | None], clock: Clock) -> None:
        if not self.shared_taints and not self._warned_off and any(any(h.live.values()) for h in by_gpu.values()):
            self._warned_off = True
            _LOG.warning("a claim asks for exclusive-gpu MIG isolation but mig_isolation is off on this agent: other "
                         "tenants' GPUs are not closed to it (no Shared taints); turn mig_isolation on")
        for gpu, value in sorted(values.items()):
            known = {t: e for t, e in by_gpu[gpu].tenants.items() if t != UNKNOWN_TENANT}
            if value != CONFLICT_VALUE or gpu_taint_value(known, self.shared_taints) != CONFLICT_VALUE:
                self._reported.pop(gpu, None)  # an unknown tenant (a corrupt state) alone raced nothing
                continue
            tenants = frozenset(known)
            if self._reported.get(gpu) == tenants:
                continue
            self._reported[gpu] = tenants
            self.breaches.inc()
            exclusive = sorted(t for t, e in known.items() if e)
            message = (f"GPU {gpu} holds MIG slices of tenants {', '.join(sorted(tenants))}, of which "
                       f"{', '.join(exclusive)} asked for exclusive-gpu isolation (allocations raced the isolation "
                       "taint); nothing is killed, the GPU takes no new claim (taint Conflict) until they are gone")
            _LOG.error("%s", message)
            device = min(d.name for d in self._inventory.values() if d.gpu_uuid == gpu)
            self._event(device, "IsolationBreached", message, clock, True)
