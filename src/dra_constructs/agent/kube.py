"""The Kubernetes side, through the maintained ``kubernetes`` Python client (imported lazily).

Only a few endpoints are used: list/watch ResourceClaims (``resource.k8s.io``) and the node's
Pods, create/replace/delete DeviceTaintRules, create Events, and ``/version``. Each method makes
one attempt and raises :class:`ApiError`; retries are the caller's (:func:`retrying`), so they
are bounded and run on the injected clock. Objects travel as plain dicts (no model classes).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from dra_constructs.agent.clock import Clock
from dra_constructs.agent.config import KubeSettings, TenantBoundary
from dra_constructs.agent.devices import DRIVER
from dra_constructs.agent.policy import PreemptionPolicy, policy_for

__all__ = [
    "ApiError",
    "Holders",
    "KubeClient",
    "KubeOps",
    "Tenant",
    "allocated_devices",
    "device_holders",
    "reserved_pods",
    "retrying",
]

T = TypeVar("T")


class ApiError(Exception):
    """A failed API call. ``status`` 0 means no HTTP answer (timeout, connection refused)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"HTTP {status}: {message}" if status else message)

    @property
    def retriable(self) -> bool:
        """Worth another try: no answer, conflict, throttled, or a server error."""
        return self.status in (0, 409, 429) or self.status >= 500


def retrying(fn: Callable[[], T], clock: Clock, retries: int, backoff_s: float) -> T:
    """Call ``fn``; retry retriable :class:`ApiError` up to ``retries`` times, doubling the wait."""
    delay = backoff_s
    for attempt in range(retries + 1):
        try:
            return fn()
        except ApiError as error:
            if not error.retriable or attempt == retries:
                raise
        clock.sleep(delay)
        delay = min(delay * 2, 30.0)
    raise AssertionError("unreachable")  # pragma: no cover


class KubeOps(Protocol):
    """What the barrier needs from the API (the real client and the simulated one)."""

    def apply_taint_rule(self, body: dict[str, Any]) -> None:
        """Create the DeviceTaintRule, or replace it if it exists (409 on create)."""

    def delete_taint_rule(self, api_version: str, name: str) -> None:
        """Delete it; a rule that is already gone is fine."""

    def post_event(self, body: dict[str, Any]) -> None:
        """Create a core/v1 Event."""

    def serves(self, api_version: str, resource: str) -> bool:
        """Discovery: True if the server lists ``resource`` in ``api_version`` (group/version)."""

    def list_taint_rules(self, api_version: str, label_selector: str) -> list[dict[str, Any]]:
        """The DeviceTaintRules whose labels match ``label_selector`` (``k=v,k=v``)."""


@dataclass(frozen=True)
class Tenant:
    """Who held a device: the claim (``namespace/name``), its namespace, uid, policy and boundary.

    ``boundary`` is the tenant's security boundary (:class:`~.config.TenantBoundary`);
    ``policy_problem`` says why the claim's policy could not be read (then ``policy`` is the
    strictest one). ``pods``: the UIDs of the pods in the claim's ``status.reservedFor``, the
    only processes the barrier may signal when the claim is released (kept in the device state:
    reservedFor is empty once the claim is deallocated).
    """

    claim: str | None = None
    namespace: str | None = None
    uid: str | None = None
    policy: PreemptionPolicy | None = None
    boundary: str | None = None
    policy_problem: str | None = None
    pods: tuple[str, ...] = ()


@dataclass(frozen=True)
class Holders:
    """Every claim holding one device (several with ``allowMultipleAllocations``), sorted by uid."""

    tenants: tuple[Tenant, ...]

    @property
    def claim(self) -> str:
        """The claims, ``namespace/name`` joined by ``, ``."""
        return ", ".join(str(t.claim) for t in self.tenants)

    @property
    def uids(self) -> frozenset[str]:
        """The claim uids."""
        return frozenset(str(t.uid) for t in self.tenants if t.uid)

    @property
    def pods(self) -> frozenset[str]:
        """The pod UIDs of every claim."""
        return frozenset(p for t in self.tenants for p in t.pods)

    def released(self) -> Tenant:
        """The tenant a barrier releases once the last of these claims is gone (one claim: itself).

        Several claims: their names joined, every pod UID, and the first claim's policy and
        boundary (the device's claims share it by their own choice; the barrier waits for the last).
        """
        if len(self.tenants) == 1:
            return self.tenants[0]
        first = self.tenants[0]
        namespaces = {t.namespace for t in self.tenants}
        return Tenant(self.claim, first.namespace if len(namespaces) == 1 else None, first.uid, first.policy,
                      first.boundary, first.policy_problem, tuple(sorted(self.pods)))


def reserved_pods(claim: dict[str, Any]) -> tuple[str, ...]:
    """UIDs of the pods in ``status.reservedFor`` (entries of resource ``pods``, core group)."""
    found = []
    for ref in (claim.get("status") or {}).get("reservedFor") or []:
        if ref.get("resource") == "pods" and not ref.get("apiGroup") and ref.get("uid"):
            found.append(str(ref["uid"]))
    return tuple(sorted(set(found)))


def device_holders(claims: list[dict[str, Any]], node: str,
                   boundary: TenantBoundary | None = None, driver: str = DRIVER) -> dict[str, Holders]:
    """Devices of ``driver`` (``gpu.nvidia.com``; the AMD agent's ``gpu.amd.com``) in pool ``node`` allocated by
    ``claims``, with every claim holding each.

    The allocation result shape (``status.allocation.devices.results[]``: driver, pool,
    device, adminAccess) is the same in v1beta1, v1beta2 and v1. Admin-access results are
    skipped: they are monitoring access, not a tenant, and ignore allocation anyway.
    """
    found: dict[str, dict[str, Tenant]] = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        allocation = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        pods = reserved_pods(claim)
        for result in allocation.get("results") or []:
            if result.get("driver") != driver or result.get("pool") != node or result.get("adminAccess"):
                continue
            namespace = meta.get("namespace")
            policy, problem = policy_for(claim, result.get("request"))
            tenant = Tenant(f"{namespace}/{meta.get('name')}", namespace, meta.get("uid"), policy,
                            (boundary or TenantBoundary()).of(meta), problem, pods)
            found.setdefault(str(result.get("device")), {}).setdefault(str(meta.get("uid")), tenant)
    return {name: Holders(tuple(by_uid[uid] for uid in sorted(by_uid))) for name, by_uid in found.items()}


def allocated_devices(claims: list[dict[str, Any]], node: str,
                      boundary: TenantBoundary | None = None) -> dict[str, Tenant]:
    """One tenant per allocated device (:func:`device_holders`, merged by :meth:`Holders.released`)."""
    return {name: holders.released() for name, holders in device_holders(claims, node, boundary).items()}


class KubeClient:
    """KubeOps plus the list/watch calls the agent loop uses, over ``kubernetes.client``."""

    def __init__(self, settings: KubeSettings) -> None:
        from kubernetes import client, config

        self._settings = settings
        if settings.mode == "in-cluster":
            config.load_incluster_config()
            configuration = client.Configuration.get_default_copy()
        elif settings.mode == "kubeconfig":
            configuration = client.Configuration()
            config.load_kube_config(config_file=settings.kubeconfig, client_configuration=configuration)
        else:
            configuration = client.Configuration()
            configuration.host = str(settings.url)
        configuration.retries = 0  # retries are ours (bounded, on the agent's clock)
        self._api = client.ApiClient(configuration)
        self._custom = client.CustomObjectsApi(self._api)
        self._core = client.CoreV1Api(self._api)
        self._version = client.VersionApi(self._api)
        self._timeout = settings.request_timeout_s

    def close(self) -> None:
        """Close the connection pool."""
        self._api.close()

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        kwargs.setdefault("_request_timeout", self._timeout)
        try:
            return fn(*args, **kwargs)
        except ApiException as error:
            raise ApiError(int(error.status or 0), str(error.reason or error.body or "")) from error
        except (HTTPError, OSError) as error:
            raise ApiError(0, f"{type(error).__name__}: {error}") from error

    @staticmethod
    def _group_version(api_version: str) -> tuple[str, str]:
        group, _, version = api_version.partition("/")
        return group, version

    # --- KubeOps ----------------------------------------------------------------------------

    def apply_taint_rule(self, body: dict[str, Any]) -> None:
        """Create, or replace on 409; a rule deleted in between (404 on GET/PUT) is created again.

        A 404 here means the object went away, not that the kind is not served: that is for
        discovery (:meth:`serves`) to say. Bounded: three rounds, then the last error.
        """
        group, version = self._group_version(body["apiVersion"])
        name = body["metadata"]["name"]
        last: ApiError | None = None
        for _ in range(3):
            try:
                self._call(self._custom.create_cluster_custom_object, group, version, "devicetaintrules", body)
                return
            except ApiError as error:
                if error.status != 409:
                    raise
            try:
                current = self._call(self._custom.get_cluster_custom_object, group, version, "devicetaintrules",
                                     name)
                replacement = json.loads(json.dumps(body))
                replacement["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                self._call(self._custom.replace_cluster_custom_object, group, version, "devicetaintrules", name,
                           replacement)
                return
            except ApiError as error:
                if error.status not in (404, 409):  # deleted meanwhile, or changed meanwhile: again
                    raise
                last = error
        assert last is not None
        raise last

    def delete_taint_rule(self, api_version: str, name: str) -> None:
        group, version = self._group_version(api_version)
        try:
            self._call(self._custom.delete_cluster_custom_object, group, version, "devicetaintrules", name)
        except ApiError as error:
            if error.status != 404:
                raise

    def serves(self, api_version: str, resource: str) -> bool:
        """``GET /apis/<group>/<version>``: is ``resource`` in its APIResourceList (404: the version is not)."""
        group, version = self._group_version(api_version)
        try:
            listing = self._call(self._custom.get_api_resources, group, version)
        except ApiError as error:
            if error.status == 404:
                return False
            raise
        if not isinstance(listing, dict):
            listing = listing.to_dict() if hasattr(listing, "to_dict") else {}
        return any(r.get("name") == resource for r in listing.get("resources") or [])

    def list_taint_rules(self, api_version: str, label_selector: str) -> list[dict[str, Any]]:
        group, version = self._group_version(api_version)
        listing = self._call(self._custom.list_cluster_custom_object, group, version, "devicetaintrules",
                             label_selector=label_selector)
        return list(listing.get("items") or [])

    def post_event(self, body: dict[str, Any]) -> None:
        namespace = body["metadata"].get("namespace") or self._settings.event_namespace
        self._call(self._core.create_namespaced_event, namespace, body)

    # --- reads ------------------------------------------------------------------------------

    def server_version(self) -> str:
        """``major.minor`` of the API server (``/version``), e.g. ``"1.33"``."""
        response = self._call(self._version.get_code, _preload_content=False)
        info = json.loads(response.data)
        minor = "".join(ch for ch in str(info.get("minor", "")) if ch.isdigit())  # "34+" on some clouds
        return f"{info.get('major')}.{minor}"

    def list_claims(self, resource_version: str) -> tuple[list[dict[str, Any]], str]:
        """All ResourceClaims (``resource.k8s.io/<resource_version>``) and the list's resourceVersion."""
        result = self._call(self._custom.list_cluster_custom_object, "resource.k8s.io", resource_version,
                            "resourceclaims")
        return list(result.get("items") or []), str(result["metadata"].get("resourceVersion", ""))

    def watch_claims(self, resource_version: str, since: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """Claim events after ``since`` until the server-side timeout; 410 raises ApiError(410)."""
        return self._watch(self._custom.list_cluster_custom_object, "resource.k8s.io", resource_version,
                           "resourceclaims", resource_version_=since)

    def list_pods(self, node: str) -> tuple[list[dict[str, Any]], str]:
        """The pods bound to ``node`` and the list's resourceVersion."""
        response = self._call(self._core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}",
                              _preload_content=False)
        data = json.loads(response.data)
        return list(data.get("items") or []), str(data["metadata"].get("resourceVersion", ""))

    def watch_pods(self, node: str, since: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """Pod events on ``node`` after ``since``."""
        return self._watch(self._core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={node}",
                           resource_version_=since)

    def _watch(self, fn: Callable[..., Any], *args: Any, resource_version_: str, **kwargs: Any
               ) -> Iterator[tuple[str, dict[str, Any]]]:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        timeout = self._settings.watch_timeout_s
        stream = watch.Watch().stream(
            fn, *args, resource_version=resource_version_, timeout_seconds=timeout,
            _request_timeout=timeout + self._timeout, **kwargs,
        )
        try:
            # The client turns ERROR events (410 Gone: expired resourceVersion) into ApiException
            # when timeout_seconds is set; ``raw_object`` is the object as the server sent it.
            for event in stream:
                yield str(event.get("type")), event.get("raw_object") or {}
        except ApiException as error:
            raise ApiError(int(error.status or 0), str(error.reason)) from error
        except (HTTPError, OSError) as error:
            raise ApiError(0, f"{type(error).__name__}: {error}") from error
