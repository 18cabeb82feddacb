"""The ``run`` loop: watch claims and pods, guard allocated devices, run barriers on release.

Startup (fail-closed): every device whose state is unknown, mid-barrier or still marked
allocated although no claim holds it any more is sanitized before anything else; a verified
release that was cut off is finished; quarantined devices get their guards re-applied.
A device whose stored claims differ from the live ones changed hands while the agent did not
see it (restart, API outage, a barrier cancelled at stop, a watch re-list): :mod:`.turnover`
decides (the barrier before the new pods run, or a reported adoption; never a silent one).
Shared devices (several claims, ``allowMultipleAllocations``) are released when their last claim
goes: no barrier, drain included, runs while another claim holds the device, because nothing
could be proven clean under a live co-tenant and the released claim's pods have already ended
(a claim is deallocated once its reservedFor is empty); leftovers of its pods are drained with
the last claim's.
Then two watch threads (claims, the node's pods) feed :meth:`Agent.reconcile`; each watch is
bounded by a server-side timeout and re-listed on ``410 Gone``. Barriers run in a thread pool,
one per device at a time.

API down at start (fail-closed): if the claims cannot be listed, nothing is known about who
holds what, so no barrier that could signal a process runs: allocated and unknown devices
keep their guards, mid-barrier devices get compute mode PROHIBITED again, only verified
releases are finished and quarantines re-applied (a quarantine that clears itself once its
contexts are gone waits for the claims too). A device with no saved state (never
sanitized, or its UUID changed) gets compute mode PROHIBITED too: the one guard the agent has
without the API (taints need it) that stops new contexts without touching running ones, so a
tenant whose claim it cannot see keeps running and nobody else can start on unproven memory
(metric ``dra_sanitizer_unknown_devices_without_api``, an error log per device; retried each
tick). AMD GPUs have no compute mode: there the device gets no local guard (label ``none``, not
recorded as guarded), no barrier and no signal, and a live claim found holding it once the API
answers gets a Warning ``LocalGuardResolved``. The claims watch keeps retrying; its first
successful list runs the normal startup recovery, which decides: held by a live claim ->
``in-use`` taint, then compute mode DEFAULT again for its tenant; free -> the whole barrier.
Each decision is a Normal Event ``LocalGuardResolved`` and a log line.

A claim naming a device the agent did not enumerate (a MIG instance created after start,
DynamicMIG, a name the agent derives differently, a device dropped by an enumeration error)
is never skipped: the agent re-enumerates, and if the device is still unknown it alerts
(Event ``UnmappedDevice``, metric ``dra_sanitizer_unmapped_claim_devices``, error log) and
guards it with its DeviceTaintRule (value ``unmapped``) so it cannot be handed to anyone else
until the agent can map and sanitize it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from dra_constructs.agent import canary, turnover
from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.clock import Clock, RealClock
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.kube import ApiError, Holders, Tenant, device_holders
from dra_constructs.agent.metrics import HealthServer
from dra_constructs.agent.runtime import Runtime
from dra_constructs.agent.state import Phase

__all__ = ["Agent"]



_LOG = logging.getLogger("dra_sanitizer.agent")
#: How a never-sanitized device is guarded while the claims are unknown (the metric's label).
_LOCAL_GUARDS = ("compute-mode", "compute-instance", "no-instance", "none", "failed")


def _terminating(pod: dict[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) or (
        (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


class Agent:
    """One node's sanitizer agent."""

    def __init__(self, runtime: Runtime, reconcile_interval_s: float = 30.0, clock: Clock | None = None) -> None:
        self.rt = runtime
        self.clock: Clock = clock or RealClock()  # for Events about devices the agent does not know
        #: Current device infos by name, shared with the barrier (a cold reset re-keys them).
        self._devices = runtime.barrier.deps.inventory
        if not self._devices:
            self._devices.update({d.name: d for d in runtime.devices})
        self._unmapped: dict[str, str] = {}  # device -> claim uid alerted for
        self._enumeration_errors: list[str] = []
        self._may_hide: Callable[[str], bool] = lambda _name: False
        if runtime.enumeration is not None:
            self._enumeration_errors = [str(e) for e in runtime.enumeration.errors]
            self._may_hide = runtime.enumeration.may_hide
        #: False while the claims could not be listed: no barrier that signals may run.
        self.api_known = runtime.kube is None
        self._pool = ThreadPoolExecutor(max_workers=runtime.config.max_parallel, thread_name_prefix="barrier")
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[Any]] = {}
        self._allocated: dict[str, Holders] = {}
        self._claims: dict[str, dict[str, Any]] = {}
        self._pods: dict[str, dict[str, Any]] = {}
        runtime.barrier.deps.pod_name = self._pod_name
        runtime.barrier.deps.pod_check = self.pod_check
        #: API down: never-sanitized devices and how they are guarded locally (see guard_unknown_locally).
        self._local: dict[str, str] = {}
        self._local_lock = threading.Lock()  # tick (run loop) and the first successful list (watch thread)
        self._listed = threading.Event()
        self._started = threading.Event()
        self.stop = threading.Event()
        self._interval = reconcile_interval_s
        self.server: HealthServer | None = None

    # --- health -----------------------------------------------------------------------------

    def healthy(self) -> bool:
        """The process is alive and its loop not stopped."""
        return not self.stop.is_set()

    def ready(self) -> bool:
        """Startup recovery done and (with an API) the claims listed once."""
        mig = self.rt.barrier.deps.mig_access  # DynamicMIG without MIG management: not ready (said once)
        return self._started.is_set() and (self.rt.kube is None or self._listed.is_set()) and (
            mig is None or mig.problem is None)

    # --- barrier scheduling -----------------------------------------------------------------

    def submit(self, device: str, job: Callable[[], Any]) -> Future[Any] | None:
        """Run ``job`` for ``device`` unless one is already running for it."""
        with self._lock:
            running = self._inflight.get(device)
            if running is not None and not running.done():
                return None
            future = self._pool.submit(self._guarded, device, job)
            self._inflight[device] = future
            return future

    def wait(self) -> None:
        """Wait for every barrier job submitted so far (tests, shutdown)."""
        with self._lock:
            futures = list(self._inflight.values())
        for future in futures:
            future.result()

    def _pod_name(self, uid: str) -> str | None:
        """``namespace/name`` of a pod of this node by UID, if the pods watch knows it."""
        meta = (self._pods.get(uid) or {}).get("metadata") or {}
        return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("name") else None

    def pod_check(self, uid: str, claims: str | None) -> str | None:
        """Why a pod UID of a released claim's ``status.reservedFor`` is not trusted for signalling (None: it is).

        ``reservedFor`` is the API's word. The pod a process belongs to is the node's (its own
        cgroup names the pod UID, :mod:`.owners`): so the process is in that pod on this node. That
        the pod uses the claim is cross-checked with the pods watch of this node: a pod it knows
        must be in the claim's namespace and name the claim in ``status.resourceClaimStatuses`` or
        ``spec.resourceClaims``; else its processes are reported, never signalled. A pod the watch
        does not know (deleted while its processes linger: what the drain is for) is trusted on its
        cgroup, the only source left.
        """
        pod = self._pods.get(uid)
        if pod is None or not claims:
            return None
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace")
        named = {str(s.get("resourceClaimName")) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
                 if s.get("resourceClaimName")}
        named |= {str(s.get("resourceClaimName")) for s in (pod.get("spec") or {}).get("resourceClaims") or []
                  if s.get("resourceClaimName")}
        wanted = [c.partition("/") for c in claims.split(", ")]
        if any(ns == namespace and name in named for ns, _, name in wanted):
            return None
        return (f"the pod {namespace}/{meta.get('name')} on this node does not reference claim(s) {claims} "
                f"(it names {', '.join(sorted(named)) or 'none'})")

    def _guarded(self, device: str, job: Callable[[], Any]) -> None:
        try:
            job()
        except Exception:  # keep the agent alive; the state file still says where the device is
            _LOG.exception("barrier job for %s failed", device)
        finally:
            with self._lock:
                holders = self._allocated.get(device)
            for tenant in holders.tenants if holders is not None else ():  # allocated again meanwhile
                self.rt.barrier.mark_allocated(self._devices[device], tenant)
            self.isolate()  # a finished barrier may lift its GPU's isolation taint

    def startup(self) -> None:
        """Recover every device (see module docstring); waits for the resulting barriers."""
        if not self.api_known:
            self._hold_without_api()
            return
        store = self.rt.barrier.deps.store
        futures = []
        local: dict[str, Holders | None] = {}  # guarded by compute mode while the API was down
        with self._local_lock:
            unguarded = {name for name, outcome in self._local.items() if outcome == "none"}  # no guard existed
        for name, info in list(self._devices.items()):
            state = store.load(name, info.uuid)
            holders = self._allocated.get(name)
            if state.local_guard or name in self._local:
                local[name] = holders
            if holders is not None and turnover.missed(state, holders):
                # Another claim took it while the agent did not see it: never adopt silently.
                future = self.submit(name, partial(turnover.resolve, self.rt.barrier, info,
                                                   turnover.stored_tenant(state), holders))
                futures.extend([future] if future is not None else [])
                continue
            if holders is not None and state.phase in (Phase.CLEAN, Phase.ALLOCATED, Phase.UNKNOWN):
                # Held by a live claim: guard it now, sanitize when it is released (never kill a tenant).
                for tenant in holders.tenants:
                    self.rt.barrier.mark_allocated(info, tenant)
                continue
            job: Callable[[], Any]
            if state.phase is Phase.ALLOCATED and holders is None:
                job = partial(self.rt.barrier.run, info, "deallocated-while-down",
                              turnover.stored_tenant(state))
            else:
                job = partial(self.rt.barrier.recover, info)
            future = self.submit(name, job)
            if future is not None:
                futures.append(future)
        for future in futures:
            future.result()
        canary.at_start(self.rt.barrier, list(self._devices.values()), lambda name: name in self._allocated)
        self._resolved(local, unguarded)
        self.rt.metrics.api_unknown.set(0)
        self._started.set()
        self.isolate()

    def _resolved(self, local: dict[str, Holders | None], unguarded: set[str] | None = None) -> None:
        """The API answers again: say what became of each device guarded locally while it was down.

        ``unguarded``: devices of a backend without a local guard (AMD: ``none``); one a live claim
        holds is a Warning, its pods may have started on memory not sanitized since the last tenant.
        """
        unguarded = unguarded or set()
        with self._local_lock:
            self._local.clear()
            for guard in _LOCAL_GUARDS:
                self.rt.metrics.unknown_without_api.labels(guard).set(0)
        store = self.rt.barrier.deps.store
        for name, tenant in sorted(local.items()):
            state = store.load(name)
            if tenant is not None and name in unguarded:
                message = (f"held by claim {tenant.claim}: guarded by its in-use taint now; no local guard existed "
                           f"while the claims were unknown (no compute mode on this backend), so its pods may have "
                           f"started on memory not sanitized since the previous tenant; sanitized when released")
            elif tenant is not None:
                lifted = "compute mode DEFAULT again" if not state.local_guard else "compute mode still PROHIBITED"
                message = (f"held by claim {tenant.claim}: guarded by its in-use taint, {lifted}; sanitized when "
                           f"released")
            elif state.phase is Phase.CLEAN:
                message = "free: sanitized and released"
            else:
                message = f"free: {state.phase.value}{f' ({state.reason})' if state.reason else ''}"
            _LOG.warning("claims known again; %s, guarded locally while they were not: %s", name, message)
            self.rt.guard.event(name, "LocalGuardResolved", message, self.clock,
                                warning=tenant is not None and name in unguarded)

    def _hold_without_api(self) -> None:
        """Startup while the claims cannot be listed: keep every guard, signal nobody."""
        store = self.rt.barrier.deps.store
        self.rt.metrics.api_unknown.set(1)
        for name, info in list(self._devices.items()):
            state = store.load(name, info.uuid)
            if state.phase in (Phase.RELEASING, Phase.QUARANTINED):
                # Finishes a verified release or re-guards; runs no barrier (no drain): kills nobody.
                self.submit(name, partial(self.rt.barrier.recover, info, barrier_allowed=False))
            elif state.phase not in (Phase.CLEAN, Phase.ALLOCATED, Phase.UNKNOWN):
                # Cut off mid-barrier: nobody may create a context until the barrier can run again
                # (a DynamicMIG placement: on its real instance, if one exists).
                self.rt.barrier.prohibit(info, "re-guard while the API is unknown")
        self._guard_unknown_locally()
        _LOG.error("claims unknown (API unreachable): every guard is kept, no barrier runs, nothing is "
                   "killed; retrying")

    def _guard_unknown_locally(self) -> None:
        """API down: compute mode PROHIBITED on devices with no saved state (retried until it holds)."""
        with self._local_lock:
            for name, info in list(self._devices.items()):
                if self.api_known:
                    return  # the claims are listed: the normal startup recovery decides now
                if self._local.get(name) in ("compute-mode", "compute-instance", "none"):
                    continue  # guarded, or no guard exists on this backend (said once)
                outcome = self.rt.barrier.guard_unknown_locally(info)
                if outcome == "known":
                    self._local.pop(name, None)
                else:
                    self._local[name] = outcome
            for guard in _LOCAL_GUARDS:
                self.rt.metrics.unknown_without_api.labels(guard).set(
                    sum(1 for outcome in self._local.values() if outcome == guard))

    # --- inventory --------------------------------------------------------------------------

    def refresh_devices(self) -> list[DeviceInfo]:
        """Re-enumerate (new MIG instances, DynamicMIG, reconfiguration); the devices that are new."""
        nvml = self.rt.barrier.deps.nvml
        try:
            result = nvml.enumerate()
        except BackendError as error:
            self._enumeration_errors = [str(error)]
            self._may_hide = lambda _name: True  # nothing is known: any name may be hidden
            self.rt.metrics.enumeration_errors.inc()
            _LOG.error("device enumeration failed: %s", error)
            return []
        found = result.devices
        self._enumeration_errors = [str(e) for e in result.errors]
        self._may_hide = result.may_hide
        if self._enumeration_errors:
            self.rt.metrics.enumeration_errors.inc(len(self._enumeration_errors))
            _LOG.error("device enumeration had errors (devices may be missing): %s",
                       "; ".join(self._enumeration_errors))
        new = []
        with self._lock:
            for info in found:
                old = self._devices.get(info.name)
                if old is not None and old.dynamic:
                    continue  # a DynamicMIG placement: its instance comes and goes, the device stays
                if old is None or (old.uuid != info.uuid and not info.dynamic):
                    new.append(info)
                self._devices[info.name] = info
        for info in new:
            _LOG.warning("device %s (%s) appeared after start", info.name, info.uuid)
        return new

    def _map(self, claims: list[dict[str, Any]]) -> dict[str, Holders]:
        """Allocated devices of this node and every claim on each; unknown names: re-enumerate, alert, guard."""
        cfg = self.rt.config
        allocated = device_holders(claims, cfg.node_name, cfg.tenant_boundary, cfg.dra_driver)
        if any(name not in self._devices for name in allocated):
            self.refresh_devices()
        for name, holders in allocated.items():
            tenant = holders.released()
            if name not in self._devices:
                self._alert_unmapped(name, tenant)
            elif name in self._unmapped:
                del self._unmapped[name]
                self.rt.metrics.unmapped_devices.labels(name).set(0)
                _LOG.warning("device %s named by claim %s is mapped now", name, tenant.claim)
        return {name: tenant for name, tenant in allocated.items() if name in self._devices}

    def _alert_unmapped(self, name: str, tenant: Tenant) -> None:
        """A claim holds a device the agent cannot map: alert (once per claim) and guard it."""
        self.rt.metrics.unmapped_devices.labels(name).set(1)
        clock = self.clock
        if self._unmapped.get(name) == tenant.uid:
            return
        self._unmapped[name] = str(tenant.uid)
        errors = (f"; enumeration errors that may hide it: {'; '.join(self._enumeration_errors)}"
                  if self._may_hide(name) else "")
        message = (f"claim {tenant.claim} holds {name}, which the agent cannot map to a device it enumerated"
                   f"{errors}; guarded until it can be mapped and sanitized")
        _LOG.error("%s", message)
        self.rt.guard.event(name, "UnmappedDevice", message, clock)
        try:
            if not self.rt.guard.taint(name, "unmapped", clock, message):
                _LOG.error("%s: no DeviceTaintRule here (%s): nothing keeps it from the next claim",
                           name, self.rt.guard.describe(name))
        except Exception as error:  # GuardError or an API failure: alerted already, keep going
            _LOG.error("%s: cannot guard the unmapped device: %s", name, error)

    def reconcile(self) -> None:
        """Compare claim allocations with what we knew: guard new ones, sanitize released ones."""
        now = self._map(list(self._claims.values()))
        if not self._started.is_set():
            # The first successful list after the API was down at start: recover now, knowing the claims.
            self.api_known = True
            with self._lock:
                self._allocated = now
            self.startup()
            return
        with self._lock:
            before, self._allocated = self._allocated, now
        for name, holders in now.items():
            old = before.get(name)
            info = self._devices[name]
            if old is not None and not turnover.same_occupancy(old, holders):
                # Another claim took it without a release in between (a re-list after a missed event).
                self.submit(name, partial(turnover.resolve, self.rt.barrier, info, old.released(), holders))
                continue
            if old is not None:
                for gone in sorted(old.uids - holders.uids):
                    _LOG.info("%s: claim %s released it; still held by %s: sanitized when the last claim "
                              "releases it", name, gone, holders.claim)
            known = {t.uid: t.pods for t in old.tenants} if old is not None else {}
            for tenant in holders.tenants:  # new holders, and new pods of known ones (kept for the drain)
                if tenant.uid not in known or not set(tenant.pods) <= set(known[tenant.uid]):
                    self.rt.barrier.mark_allocated(info, tenant)
        for name, old in before.items():
            if name not in now:
                self.submit(name, partial(self.rt.barrier.run, self._devices[name], "deallocated", old.released()))
        self.isolate()
        self.pods_changed()

    def isolate(self) -> None:
        """MIG isolation taints for the live claims and the barriers under way (:mod:`.isolation`)."""
        isolation = self.rt.isolation
        if isolation is None or not self.api_known or not self._started.is_set():
            return
        try:
            isolation.reconcile(list(self._claims.copy().values()), self.clock)
        except Exception:  # never ends a watch or a barrier thread; the next reconcile or tick retries
            _LOG.exception("MIG isolation reconcile failed")

    def pods_changed(self) -> None:
        """Without taints: refuse new contexts once every pod of a device's claims is terminating.

        And lift that again as soon as a running pod holds one of them (a no-surge rollout on a
        shared claim: the new pod joins the claim the old one leaves; it is never deallocated).
        """
        if self.rt.guard.has_taints or not self._started.is_set():
            return
        with self._lock:
            allocated = dict(self._allocated)
        known = dict(self._pods)  # a copy: the pods watch thread changes it
        for name, holders in allocated.items():
            pods = holders.pods
            if name not in self._devices or not pods:
                continue
            if all(uid in known and _terminating(known[uid]) for uid in pods):
                self.rt.barrier.tenant_leaving(self._devices[name])
            elif any(uid in known and not _terminating(known[uid]) for uid in pods):
                self.rt.barrier.tenant_back(self._devices[name])

    # --- watches ----------------------------------------------------------------------------

    def _watch_loop(self, list_fn: Callable[[], tuple[list[dict[str, Any]], str]],
                    watch_fn: Callable[[str], Iterator[tuple[str, dict[str, Any]]]],
                    cache: dict[str, dict[str, Any]], changed: Callable[[], None], name: str) -> None:
        backoff = self.rt.config.kube.retry_backoff_s
        while not self.stop.is_set():
            try:
                items, version = list_fn()
                cache.clear()
                cache.update({str(i["metadata"].get("uid")): i for i in items})
                changed()
                if name == "claims":
                    self._listed.set()
                backoff = self.rt.config.kube.retry_backoff_s
                while not self.stop.is_set():
                    for kind, obj in watch_fn(version):
                        meta = obj.get("metadata") or {}
                        version = str(meta.get("resourceVersion") or version)
                        if kind == "DELETED":
                            cache.pop(str(meta.get("uid")), None)
                        elif kind in ("ADDED", "MODIFIED"):
                            cache[str(meta.get("uid"))] = obj
                        else:
                            continue  # BOOKMARK
                        changed()
                        if self.stop.is_set():
                            return
            except ApiError as error:
                if error.status == 410:
                    _LOG.info("%s watch expired (410); re-listing", name)
                    continue
                _LOG.warning("%s watch failed: %s; retrying in %.1fs", name, error, backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 60.0)
            except Exception:  # a bug in a reconcile must not end the watch: nothing would be sanitized again
                _LOG.exception("%s watch: unexpected error; re-listing in %.1fs", name, backoff)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, 60.0)

    def run(self) -> int:
        """Serve until :attr:`stop` is set; returns the exit code."""
        cfg = self.rt.config
        self.server = HealthServer(self.rt.metrics, cfg.metrics_address, cfg.metrics_port, self.healthy, self.ready)
        self.server.start()
        kube = self.rt.kube
        threads: list[threading.Thread] = []
        self.initial_list()
        self.startup()
        if kube is not None:
            resource_version = self.rt.target.resource_version
            threads = [
                threading.Thread(target=self._watch_loop, name="watch-claims", daemon=True, args=(
                    lambda: kube.list_claims(resource_version),
                    lambda since: kube.watch_claims(resource_version, since),
                    self._claims, self.reconcile, "claims")),
                threading.Thread(target=self._watch_loop, name="watch-pods", daemon=True, args=(
                    lambda: kube.list_pods(cfg.node_name), lambda since: kube.watch_pods(cfg.node_name, since),
                    self._pods, self.pods_changed, "pods")),
            ]
            for thread in threads:
                thread.start()
        while not self.stop.wait(self._interval):
            self.tick()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.server.stop()
        return 0

    def initial_list(self) -> bool:
        """List the claims once before startup; False (API state unknown) if that fails."""
        kube = self.rt.kube
        if kube is None:
            self.api_known = True
            return True
        try:
            items, _ = kube.list_claims(self.rt.target.resource_version)
        except ApiError as error:
            _LOG.error("cannot list claims at startup (%s): allocations unknown; keeping every guard, "
                       "killing nothing, retrying", error)
            self.api_known = False
            return False
        self._claims = {str(i["metadata"].get("uid")): i for i in items}
        self._allocated = self._map(items)
        self.api_known = True
        return True

    def tick(self) -> None:
        """Periodic: finish interrupted releases, re-apply quarantine guards, find new devices, gauges."""
        if self._started.is_set():
            new = self.refresh_devices()
            with self._lock:
                allocated = dict(self._allocated)
            for info in new:
                if info.name in allocated:
                    for tenant in allocated[info.name].tenants:
                        self.rt.barrier.mark_allocated(info, tenant)
                else:  # appeared free after start (MIG reconfiguration): proven clean before anyone gets it
                    self.submit(info.name, partial(self.rt.barrier.recover, info))
        elif not self.api_known:
            self._guard_unknown_locally()  # a guard NVML refused, or a DynamicMIG instance that appeared
        counts: dict[str, int] = {}
        for name, info in list(self._devices.items()):
            state = self.rt.barrier.deps.store.load(name, info.uuid)
            counts[state.phase.value] = counts.get(state.phase.value, 0) + 1
            if self._started.is_set() and state.local_guard and state.phase is Phase.ALLOCATED:
                self.rt.barrier.lift_local_guard(info)  # NVML refused DEFAULT before: its tenant needs it
            if state.phase in (Phase.RELEASING, Phase.QUARANTINED) or (
                    self._started.is_set() and state.phase is Phase.DIRTY):
                # Claims unknown: finish releases and re-guard only (no barrier that could signal).
                self.submit(name, partial(self.rt.barrier.recover, info, barrier_allowed=self._started.is_set()))
        for phase in Phase:
            self.rt.metrics.devices.labels(phase.value).set(counts.get(phase.value, 0))
        self.isolate()  # retries what the API refused
