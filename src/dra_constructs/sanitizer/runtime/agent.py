"""The ``run`` loop: watch claims and pods, guard allocated devices, run barriers on release.

Startup (fail-closed): every device whose state is unknown, mid-barrier or still marked
allocated although no claim holds it any more is sanitized before anything else; a verified
release that was cut off is finished; quarantined devices get their guards re-applied.
Then two watch threads (claims, the node's pods) feed :meth:`Agent.reconcile`; each watch is
bounded by a server-side timeout and re-listed on ``410 Gone``. Barriers run in a thread pool,
one per device at a time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from .kube import ApiError, Tenant, allocated_devices
from .metrics import HealthServer
from .runtime import Runtime
from .state import Phase

__all__ = ["Agent"]

_LOG = logging.getLogger("dra_sanitizer.agent")


def _terminating(pod: dict[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) or (
        (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"))


class Agent:
    """One node's sanitizer agent."""

    def __init__(self, runtime: Runtime, reconcile_interval_s: float = 30.0) -> None:
        self.rt = runtime
        self._devices = {d.name: d for d in runtime.devices}
        self._pool = ThreadPoolExecutor(max_workers=runtime.config.max_parallel, thread_name_prefix="barrier")
        self._lock = threading.Lock()
        self._inflight: dict[str, Future[Any]] = {}
        self._allocated: dict[str, Tenant] = {}
        self._claims: dict[str, dict[str, Any]] = {}
        self._pods: dict[str, dict[str, Any]] = {}
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
        return self._started.is_set() and (self.rt.kube is None or self._listed.is_set())

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

    def _guarded(self, device: str, job: Callable[[], Any]) -> None:
        try:
            job()
        except Exception:  # keep the agent alive; the state file still says where the device is
            _LOG.exception("barrier job for %s failed", device)
        finally:
            with self._lock:
                tenant = self._allocated.get(device)
            if tenant is not None:  # allocated again meanwhile (only possible without taints)
                self.rt.barrier.mark_allocated(self._devices[device], tenant)

    def startup(self) -> None:
        """Recover every device (see module docstring); waits for the resulting barriers."""
        store = self.rt.barrier.deps.store
        futures = []
        for name, info in self._devices.items():
            state = store.load(name, info.uuid)
            tenant = self._allocated.get(name)
            if tenant is not None and state.phase in (Phase.CLEAN, Phase.ALLOCATED):
                self.rt.barrier.mark_allocated(info, tenant)
                continue
            job: Callable[[], Any]
            if state.phase is Phase.ALLOCATED and tenant is None:
                job = partial(self.rt.barrier.run, info, "deallocated-while-down",
                              Tenant(state.claim, state.tenant_namespace))
            else:
                job = partial(self.rt.barrier.recover, info)
            future = self.submit(name, job)
            if future is not None:
                futures.append(future)
        for future in futures:
            future.result()
        self._started.set()

    def reconcile(self) -> None:
        """Compare claim allocations with what we knew: guard new ones, sanitize released ones."""
        now = {k: v for k, v in allocated_devices(list(self._claims.values()), self.rt.config.node_name).items()
               if k in self._devices}
        with self._lock:
            before, self._allocated = self._allocated, now
        for name, tenant in now.items():
            old = before.get(name)
            if old is not None and old.uid == tenant.uid:
                continue
            if old is not None:  # another claim took it without a release in between
                self.submit(name, partial(self.rt.barrier.run, self._devices[name], "claim-replaced", old))
            elif self._started.is_set():
                self.rt.barrier.mark_allocated(self._devices[name], tenant)
        for name, tenant in before.items():
            if name not in now:
                self.submit(name, partial(self.rt.barrier.run, self._devices[name], "deallocated", tenant))

    def pods_changed(self) -> None:
        """Without taints: refuse new contexts as soon as every pod of a claim is terminating."""
        if self.rt.guard.has_taints:
            return
        node = self.rt.config.node_name
        for claim in list(self._claims.values()):
            reserved = [r.get("uid") for r in (claim.get("status") or {}).get("reservedFor") or []]
            if not reserved or not all(uid in self._pods and _terminating(self._pods[uid]) for uid in reserved):
                continue
            for name in allocated_devices([claim], node):
                if name in self._devices:
                    self.rt.barrier.tenant_leaving(self._devices[name])

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

    def run(self) -> int:
        """Serve until :attr:`stop` is set; returns the exit code."""
        cfg = self.rt.config
        self.server = HealthServer(self.rt.metrics, cfg.metrics_address, cfg.metrics_port, self.healthy, self.ready)
        self.server.start()
        kube = self.rt.kube
        threads: list[threading.Thread] = []
        if kube is not None:
            resource_version = self.rt.target.resource_version
            try:
                items, _ = kube.list_claims(resource_version)
                self._claims = {str(i["metadata"].get("uid")): i for i in items}
                self._allocated = {k: v for k, v in allocated_devices(items, cfg.node_name).items()
                                   if k in self._devices}
            except ApiError as error:
                _LOG.error("cannot list claims at startup (%s): treating no device as allocated", error)
        self.startup()
        if kube is not None:
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

    def tick(self) -> None:
        """Periodic: finish interrupted releases, re-apply quarantine guards, refresh gauges."""
        counts: dict[str, int] = {}
        for name, info in self._devices.items():
            state = self.rt.barrier.deps.store.load(name, info.uuid)
            counts[state.phase.value] = counts.get(state.phase.value, 0) + 1
            if state.phase in (Phase.RELEASING, Phase.QUARANTINED):
                self.submit(name, partial(self.rt.barrier.recover, info))
        for phase in Phase:
            self.rt.metrics.devices.labels(phase.value).set(counts.get(phase.value, 0))
