"""What the tenant rules (DRA012-DRA014) ask about a manifest set: quotas, tenants, queues, usage.

Pure Python. Device usage follows the API server's ResourceQuota evaluator for ResourceClaims
(kubernetes ``pkg/quota/v1/evaluator/core/resource_claims.go``): an ExactCount request charges
``count`` devices of its class, ``All`` the 32 an allocation can hold, a ``firstAvailable`` request
its largest alternative per class; admin-access requests count too. Claims made from templates
exist once per pod, so a template charges once per replica the workload runs.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dra_constructs._safe_load import yaml_documents
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.manifest import Manifest, PodView, as_dict, as_list, field_path, mapping_get
from dra_constructs.tenants.kueue import QUEUE_NAME_LABEL
from dra_constructs.tenants.kueue_versions import SUPPORTED_KUEUE_MINORS, KueueVersion
from dra_constructs.tenants.quota import (
    CLAIM_COUNT_RESOURCE,
    DRIVER_CLASS_EXTENDED_NAMES,
    IMPLICIT_EXTENDED_PREFIX,
    PER_CLASS_SUFFIX,
)

__all__ = [
    "KUEUE_CONFIG_COMPONENT",
    "KUEUE_VERSION_LABEL",
    "TENANT_NAMESPACE_LABEL",
    "Contribution",
    "TenancyIndex",
    "claim_device_usage",
    "tenancy",
]

#: Label the GpuTenant construct puts on its Namespace (value: the tenant name).
TENANT_NAMESPACE_LABEL = "dra-constructs.io/tenant"
#: ``dra-constructs.io/component`` value of the ConfigMap carrying the Kueue configuration snippet.
KUEUE_CONFIG_COMPONENT = "kueue-configuration"
#: Label of that ConfigMap naming the Kueue release the snippet is for (DRA014 judges claims by it).
KUEUE_VERSION_LABEL = "dra-constructs.io/kueue-version"
ALLOCATION_RESULTS_MAX = 32  # resourceapi.AllocationResultsMaxSize: what "All" is charged

_STANDARD_RESOURCES = frozenset({"cpu", "memory", "storage", "ephemeral-storage", "pods"})
_INT = re.compile(r"^\s*\d+\s*$")


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INT.match(value):
        return int(value)
    return default


def _request_devices(fields: dict[str, Any]) -> int:
    mode = fields.get("allocationMode", "ExactCount")
    if mode == "ExactCount":
        return max(_int(fields.get("count"), 1), 0)
    if mode == "All":
        return ALLOCATION_RESULTS_MAX
    return 0  # unknown modes are not charged (the evaluator's downgrade case)


def claim_device_usage(claim: Manifest) -> dict[str, int]:
    """Devices one ResourceClaim (or one claim made from a template) charges, per DeviceClass."""
    usage: dict[str, int] = defaultdict(int)
    if claim.claim_spec is None:
        return usage
    spec, _ = claim.claim_spec
    for raw in as_list(as_dict(spec.get("devices")).get("requests")):
        request = as_dict(raw)
        first = request.get("firstAvailable")
        if isinstance(first, list):
            largest: dict[str, int] = {}
            for sub in (as_dict(s) for s in first):
                name = sub.get("deviceClassName")
                if isinstance(name, str):
                    largest[name] = max(largest.get(name, 0), _request_devices(sub))
            for name, count in largest.items():
                usage[name] += count
            continue
        body = as_dict(request.get("exactly")) if isinstance(request.get("exactly"), dict) else request
        name = body.get("deviceClassName")
        if isinstance(name, str):
            usage[name] += _request_devices(body)
    return usage


def _percent_or_int(value: Any, replicas: int, default: str, round_up: bool) -> int:
    value = default if value is None else value
    if isinstance(value, str) and value.endswith("%") and _INT.match(value[:-1]):
        share = replicas * int(value[:-1]) / 100
        return math.ceil(share) if round_up else math.floor(share)
    return max(_int(value, 0), 0)


def pod_counts(m: Manifest) -> tuple[int, int] | None:
    """``(steady, peak)`` pods of a workload at once; ``None`` when it cannot be known (DaemonSet).

    A Deployment's rolling update runs ``replicas + maxSurge`` pods (25% rounded up by default).
    """
    spec = as_dict(m.obj.get("spec"))
    kind = m.kind
    if kind == "Pod":
        return 1, 1
    if kind in ("ReplicaSet", "ReplicationController", "StatefulSet"):
        n = _int(spec.get("replicas"), 1)
        return n, n
    if kind == "Deployment":
        n = _int(spec.get("replicas"), 1)
        strategy = as_dict(spec.get("strategy"))
        if strategy.get("type") == "Recreate":
            return n, n
        surge = _percent_or_int(as_dict(strategy.get("rollingUpdate")).get("maxSurge"), n, "25%", True)
        return n, n + surge
    if kind in ("Job", "CronJob"):
        job = as_dict(mapping_get(m.obj, "spec", "jobTemplate", "spec")) if kind == "CronJob" else spec
        parallelism = _int(job.get("parallelism"), 1)
        completions = job.get("completions")
        n = min(parallelism, _int(completions, parallelism)) if completions is not None else parallelism
        return n, n
    if kind == "DaemonSet":
        return None
    return (1, 1) if m.pods else None


@dataclass
class Contribution:
    """What one object adds to a namespace's usage of one quota resource."""

    manifest: Manifest
    path: str
    amount: int
    detail: str


@dataclass
class NamespaceUsage:
    """Usage per quota resource name (steady state and rollout peak), with who contributes."""

    steady: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    peak: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    contributions: dict[str, list[Contribution]] = field(default_factory=lambda: defaultdict(list))

    def add(self, resource: str, contribution: Contribution, peak: int) -> None:
        self.steady[resource] += contribution.amount
        self.peak[resource] += peak
        self.contributions[resource].append(contribution)


@dataclass(frozen=True)
class QuotaLimit:
    """One ``spec.hard`` entry of a ResourceQuota in the set."""

    quota: Manifest
    resource: str
    hard: int


def _container_requests(pod: PodView) -> dict[str, int]:
    """Extended-resource requests of a pod (requests default to limits for extended resources)."""
    def of(container: dict[str, Any]) -> dict[str, int]:
        resources = as_dict(container.get("resources"))
        merged = {**as_dict(resources.get("limits")), **as_dict(resources.get("requests"))}
        return {k: _int(v, 0) for k, v in merged.items()
                if isinstance(k, str) and "/" in k and k not in _STANDARD_RESOURCES}

    total: dict[str, int] = defaultdict(int)
    for container in as_list(pod.spec.get("containers")):
        for name, amount in of(as_dict(container)).items():
            total[name] += amount
    for container in as_list(pod.spec.get("initContainers")):
        for name, amount in of(as_dict(container)).items():
            total[name] = max(total[name], amount)
    return total


class TenancyIndex:
    """Tenants, quotas, queues and device usage of one audit's manifest set (built once per audit)."""

    def __init__(self, ctx: AuditContext) -> None:
        self.ctx = ctx
        self.namespaces: dict[str, Manifest] = {}
        self.quotas: dict[str, list[QuotaLimit]] = defaultdict(list)
        self.local_queues: dict[str, list[Manifest]] = defaultdict(list)
        self.extended_names: dict[str, set[str]] = defaultdict(set)  # extended resource -> classes
        self.kueue_mapped: set[str] | None = None
        #: The oldest Kueue release the set's configuration snippets name (None: none named).
        self.kueue_version: KueueVersion | None = None
        for name, resource in DRIVER_CLASS_EXTENDED_NAMES.items():
            self.extended_names[resource].add(name)
        for m in ctx.representatives:  # (none of the kinds it indexes is memoized)
            self._index(m)
        self.usage: dict[str, NamespaceUsage] = defaultdict(NamespaceUsage)
        self._count_usage()

    def _index(self, m: Manifest) -> None:
        if m.kind == "Namespace" and m.api_version == "v1":
            self.namespaces[m.name] = m
        elif m.kind == "ResourceQuota" and m.api_version == "v1":
            spec = as_dict(m.obj.get("spec"))
            if spec.get("scopes") or spec.get("scopeSelector"):
                return  # the claim evaluator matches no scoped quota (generic.MatchesNoScopeFunc)
            for resource, value in as_dict(spec.get("hard")).items():
                if isinstance(resource, str) and isinstance(value, (int, str)) and _INT.match(str(value)):
                    self.quotas[m.namespace].append(QuotaLimit(m, resource, int(value)))
        elif m.kind == "LocalQueue" and m.group == "kueue.x-k8s.io":
            self.local_queues[m.namespace].append(m)
        elif m.is_resource_api and m.kind == "DeviceClass":
            name = as_dict(m.obj.get("spec")).get("extendedResourceName")
            if isinstance(name, str) and name:
                self.extended_names[name].add(m.name)
        elif m.kind == "ConfigMap" and m.labels().get("dra-constructs.io/component") == KUEUE_CONFIG_COMPONENT:
            self._index_kueue_config(m)

    def _index_kueue_config(self, m: Manifest) -> None:
        mapped = self.kueue_mapped if self.kueue_mapped is not None else set()
        version = KueueVersion(SUPPORTED_KUEUE_MINORS.start)  # unlabelled or unreadable: the oldest supported
        label = m.labels().get(KUEUE_VERSION_LABEL)
        if label is not None:
            with contextlib.suppress(DraConstructsError):
                version = KueueVersion.parse(label, m.name)
        if self.kueue_version is None or version.minor < self.kueue_version.minor:
            self.kueue_version = version
        for key, text in as_dict(m.obj.get("data")).items():
            if not isinstance(text, str):
                continue
            # The data is audited input: read with the input's limits (an alias bomb, an explicit tag PyYAML
            # cannot build). Text they refuse, or more than one document, maps nothing (as unreadable YAML did).
            try:
                documents = list(yaml_documents(text, m.object_id, f"data.{key}"))
            except DraConstructsError:
                continue
            config = documents[0].value if len(documents) == 1 else None
            for mapping in as_list(mapping_get(as_dict(config), "resources", "deviceClassMappings")):
                mapped.update(n for n in as_list(as_dict(mapping).get("deviceClassNames")) if isinstance(n, str))
        self.kueue_mapped = mapped

    # --- tenants and queues ----------------------------------------------------------------

    def is_tenant_namespace(self, namespace: str) -> bool:
        """Declared by GpuTenant (Namespace label), or capped by a ResourceQuota on DRA devices."""
        ns = self.namespaces.get(namespace)
        if ns is not None and ns.labels().get(TENANT_NAMESPACE_LABEL):
            return True
        return any(q.resource.endswith(PER_CLASS_SUFFIX) for q in self.quotas.get(namespace, ()))

    def is_declared_tenant(self, namespace: str) -> bool:
        ns = self.namespaces.get(namespace)
        return ns is not None and bool(ns.labels().get(TENANT_NAMESPACE_LABEL))

    def queue_of(self, m: Manifest) -> str | None:
        """The LocalQueue a workload names, ``""`` if its namespace has one but it names none, else None."""
        label = m.pod_labels().get(QUEUE_NAME_LABEL)
        if isinstance(label, str) and label:
            return label
        return "" if self.local_queues.get(m.namespace) else None

    # --- usage -----------------------------------------------------------------------------

    def _class_resources(self, device_class: str) -> list[str]:
        names = [device_class + PER_CLASS_SUFFIX]
        if self.ctx.target.has_dra_extended_resources:
            names.append("requests." + IMPLICIT_EXTENDED_PREFIX + device_class)
            names.extend("requests." + ext for ext, classes in self.extended_names.items() if device_class in classes)
        return names

    def _extended_resources(self, name: str) -> list[str]:
        names = ["requests." + name]
        if self.ctx.target.has_dra_extended_resources:
            classes = set(self.extended_names.get(name, ()))
            if name.startswith(IMPLICIT_EXTENDED_PREFIX):
                classes.add(name[len(IMPLICIT_EXTENDED_PREFIX):])
            names.extend(c + PER_CLASS_SUFFIX for c in sorted(classes))
        return names

    def _count_usage(self) -> None:
        """Usage of the namespaces that have a ResourceQuota in the set (the only ones it is compared in)."""
        if not self.quotas:
            return
        for m in self.ctx.manifests:  # (in input order: the largest contributor is the first of equals)
            if m.namespace not in self.quotas:
                continue
            if m.kind == "ResourceClaim" and m.is_resource_api:
                usage = self.usage[m.namespace]
                usage.add(CLAIM_COUNT_RESOURCE, Contribution(m, "spec", 1, "1 claim"), 1)
                for device_class, devices in claim_device_usage(m).items():
                    for resource in self._class_resources(device_class):
                        usage.add(resource, Contribution(m, "spec.devices.requests", devices,
                                                         f"{devices} x {device_class}"), devices)
            elif m.pods and m.namespace:
                self._count_workload(m)

    def _count_workload(self, m: Manifest) -> None:
        counts = pod_counts(m)
        if counts is None:
            return
        steady, peak = counts
        usage = self.usage[m.namespace]
        for pod in m.pods:
            for path, entry in pod.claims():
                name = entry.get("resourceClaimTemplateName")
                template = self.ctx.template(m.namespace, name) if isinstance(name, str) else None
                if template is None:
                    continue
                at = field_path(path, "resourceClaimTemplateName")
                usage.add(CLAIM_COUNT_RESOURCE, Contribution(m, at, steady, f"{steady} claims"), peak)
                for device_class, devices in claim_device_usage(template).items():
                    detail = f"{steady} pods x {devices} x {device_class} (template {name!r})"
                    for resource in self._class_resources(device_class):
                        usage.add(resource, Contribution(m, at, steady * devices, detail), peak * devices)
            for name, amount in _container_requests(pod).items():
                if amount <= 0:
                    continue
                detail = f"{steady} pods x {amount} {name}"
                for resource in self._extended_resources(name):
                    usage.add(resource, Contribution(m, field_path(pod.path, "containers"), steady * amount, detail),
                              peak * amount)


def tenancy(ctx: AuditContext) -> TenancyIndex:
    """The tenancy index of ``ctx`` (built on first use, shared by the tenant rules, freed with ``ctx``)."""
    return ctx.index("tenancy", TenancyIndex)


def claim_sources(ctx: AuditContext, m: Manifest) -> Iterator[tuple[str, dict[str, Any], Manifest | None]]:
    """``(path, pod claim entry, template or claim in the set)`` for every pod claim of ``m``."""
    for path, entry in m.pod_claims():
        yield path, entry, ctx.claim_source(m, entry)
