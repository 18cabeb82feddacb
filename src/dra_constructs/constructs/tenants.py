"""``GpuTenant`` and ``TenantPlatform``: a team's namespace, device quota, Kueue queue and admission scope.

Construct layer (imports cdk8s). The objects come from the pure builders in
:mod:`dra_constructs.tenants.quota`, :mod:`dra_constructs.tenants.kueue` and
:mod:`dra_constructs.tenants.admission`; these constructs place them as ``ApiObject``\\ s.

Decision (ResourceQuota counts per DeviceClass): the platform emits one DeviceClass per
(GPU model, MIG profile) and per whole-GPU model a tenant's quota names, shared by every tenant
(Kueue allows 16 ``deviceClassMappings``, so per-tenant classes would not scale); each tenant's
quota caps its classes and closes the driver's own classes (limit 0), and the tenant's admission
policy refuses any other class in its namespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import cdk8s
import constructs
import yaml

from dra_constructs.catalog import DEVICE_CLASS_SELECTORS
from dra_constructs.catalog.amd import AMD_DEVICE_CLASS
from dra_constructs.constructs.admission_policy import GuardrailsAdmissionPolicy
from dra_constructs.constructs.claims import GpuClaimTemplate
from dra_constructs.constructs.scope import resolve_mig_mode, resolve_target, set_kueue_compatible
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.policy import POLICY_RULES
from dra_constructs.guardrails.tenancy import KUEUE_CONFIG_COMPONENT, KUEUE_VERSION_LABEL, TENANT_NAMESPACE_LABEL
from dra_constructs.isolation import ISOLATION_LABEL, LEVELS, IsolationLevel, tolerations_for
from dra_constructs.requests import DeviceToleration, GpuRequest, MigRequest
from dra_constructs.requests_amd import AmdGpuRequest, AmdPartitionRequest
from dra_constructs.target import Target
from dra_constructs.tenants.admission import device_class_policy_manifests
from dra_constructs.tenants.kueue import (
    QUEUE_NAME_LABEL,
    cluster_queue,
    device_class_mappings,
    kueue_configuration,
    local_queue,
    resource_flavor,
)
from dra_constructs.tenants.kueue_versions import KueueVersion
from dra_constructs.tenants.quota import (
    DEFAULT_CLASS_DOMAIN,
    AmdGpu,
    AmdPartition,
    CounterQuota,
    Mig,
    MigSlices,
    QuotaKey,
    TenantDeviceClass,
    WholeGpu,
    resolve_quotas,
    resource_quota_hard,
)
from dra_constructs.validation import check_dns_label, check_dns_subdomain, check_labels, to_dns_label

__all__ = ["GpuTenant", "KueueQueue", "TenantPlatform", "set_kueue_compatible"]

_MANAGED = {"app.kubernetes.io/managed-by": "dra-constructs"}
_ADMIN_ACCESS_LABELS = ("resource.k8s.io/admin-access", "resource.kubernetes.io/admin-access")


def _api_object(scope: constructs.Construct, id: str, manifest: Mapping[str, Any]) -> cdk8s.ApiObject:
    metadata = dict(manifest["metadata"])
    obj = cdk8s.ApiObject(scope, id, api_version=manifest["apiVersion"], kind=manifest["kind"],
                          metadata=cdk8s.ApiObjectMetadata(**{
                              "name": metadata["name"], "namespace": metadata.get("namespace"),
                              "labels": metadata.get("labels")}))
    for key, value in manifest.items():
        if key not in ("apiVersion", "kind", "metadata"):
            obj.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", value))
    return obj


def _check_unnamespaced_chart(scope: constructs.Construct, where: str) -> None:
    chart = cdk8s.Chart.of(scope)
    if chart.namespace:
        raise DraConstructsError(
            where, "scope", chart.namespace,
            "the chart has a namespace, which cdk8s would write into cluster-scoped objects (Namespace, "
            "DeviceClass, ClusterQueue, admission policies)",
            "put tenants and the platform in a chart without namespace=; put the tenant's workloads in a chart "
            "with namespace=tenant.namespace",
        )


@dataclass(frozen=True)
class KueueQueue:
    """The tenant's Kueue queues: a ClusterQueue in ``cohort`` and a LocalQueue in its namespace.

    :param cohort: the cohort the tenants' ClusterQueues share (``None``: no cohort, no borrowing).
    :param borrowing_limit: devices of each kind (slices, for a ``MigSlices`` quota) the tenant
        may borrow beyond its quota from the cohort. The tenant's ResourceQuota is raised by the
        same amount (it is the hard cap; a Kueue-admitted workload the quota refused would never
        start). Default 0.
    :param other_quotas: nominal quotas of other resources the workloads request (``cpu``,
        ``memory``): Kueue's default quota check refuses workloads requesting a resource the
        ClusterQueue does not cover.
    :param local_queue: the LocalQueue's name (workloads name it in ``kueue.x-k8s.io/queue-name``).
    :param cluster_queue: the ClusterQueue's name. Default: ``<namespace>-gpu``.
    """

    cohort: str | None = "gpu-tenants"
    borrowing_limit: int = 0
    other_quotas: Mapping[str, str] = field(default_factory=dict)
    local_queue: str = "gpu"
    cluster_queue: str | None = None


class TenantPlatform(constructs.Construct):
    """What tenants share: the per-profile / per-model DeviceClasses, the Kueue ResourceFlavor and the
    Kueue configuration snippet (``deviceClassMappings``) for them.

    One per App is enough; ``GpuTenant`` creates it next to the first tenant when none is given.

    :param class_domain: domain of the emitted DeviceClass names. Default ``dra-constructs.io``.
    :param device_config: opaque device configuration for every emitted DeviceClass
        (``[{"driver": ..., "parameters": {...}}]``, or objects with ``.opaque()`` such as the
        sanitizer's preemption policy): Kueue does not admit per-claim config, the class-level
        form is admitted.
    :param flavor: the Kueue ResourFlavor name. Default ``dra-constructs-gpu``.
    :param flavor_node_labels: ``nodeLabels`` of the flavor (the GPU nodes). Default none.
    :param kueue_config_namespace: namespace of the ConfigMap carrying the Kueue configuration
        snippet (``None``: no ConfigMap; ``kueue_configuration()`` still returns it). Default
        ``kueue-system``.
    :param kueue_version: the Kueue release the snippet is for (``"0.18"`` or ``"0.19"``, the
        default): it sets ``featureGates`` for what that release has off by default (counter
        sources in 0.18).
    """

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        class_domain: str = DEFAULT_CLASS_DOMAIN,
        device_config: Sequence[Any] = (),
        flavor: str = "dra-constructs-gpu",
        flavor_node_labels: Mapping[str, str] | None = None,
        kueue_config_namespace: str | None = "kueue-system",
        kubernetes_version: str | Target | None = None,
        kueue_version: str | KueueVersion | None = None,
    ) -> None:
        super().__init__(scope, id)
        where = self.node.path
        _check_unnamespaced_chart(scope, where)
        self.target = resolve_target(scope, kubernetes_version, where)
        self.kueue_version = KueueVersion.parse(kueue_version, where)
        self.class_domain = check_dns_subdomain(where, "class_domain", class_domain)
        self.flavor = check_dns_subdomain(where, "flavor", flavor)
        self._flavor_node_labels = check_labels(where, "flavor_node_labels", flavor_node_labels)
        self._config = [self._opaque(where, i, c) for i, c in enumerate(device_config)]
        self._kueue_config_namespace = (None if kueue_config_namespace is None
                                        else check_dns_label(where, "kueue_config_namespace", kueue_config_namespace))
        self._classes: dict[str, TenantDeviceClass] = {}
        self._kueue_classes: dict[str, str] = {}
        self._kueue_counters: dict[str, CounterQuota] = {}
        self._kueue_config_map: cdk8s.ApiObject | None = None
        registry = _Registry.of(self)
        if registry.platform is None:
            registry.platform = self

    @staticmethod
    def _opaque(where: str, index: int, config: Any) -> dict[str, Any]:
        opaque = getattr(config, "opaque", None)
        if callable(opaque):  # a typed config (e.g. the sanitizer's PreemptionPolicy) renders itself
            config = opaque()
        if not isinstance(config, Mapping):
            raise DraConstructsError(where, f"device_config[{index}]", config, "not an opaque device config",
                                     "pass {'driver': ..., 'parameters': {...}} or an object with .opaque()")
        driver, parameters = config.get("driver"), config.get("parameters")
        if not isinstance(parameters, Mapping) or not {"apiVersion", "kind"} <= set(parameters):
            raise DraConstructsError(where, f"device_config[{index}].parameters", parameters,
                                     "opaque parameters need apiVersion and kind", "pass {'apiVersion': ..., "
                                     "'kind': ..., ...} as the driver documents it")
        return {"opaque": {"driver": check_dns_subdomain(where, f"device_config[{index}].driver", driver),
                           "parameters": dict(parameters)}}

    @classmethod
    def of(cls, scope: constructs.Construct) -> TenantPlatform:
        """The App's platform; created in ``scope``'s chart (id ``tenant-platform``) if there is none."""
        existing = _Registry.of(scope).platform
        if existing is not None:
            return existing
        return cls(cdk8s.Chart.of(scope), "tenant-platform")

    @property
    def device_classes(self) -> dict[str, TenantDeviceClass]:
        """The classes the platform emits, by name."""
        return dict(self._classes)

    def ensure_class(self, device_class: TenantDeviceClass) -> None:
        """Emit ``device_class`` (once) if the platform manages it; the driver's classes are only named."""
        if not device_class.managed or device_class.name in self._classes:
            return
        self._classes[device_class.name] = device_class
        spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in device_class.selectors]}
        if self._config:
            spec["config"] = [dict(c) for c in self._config]
        _api_object(self, device_class.name, {
            "apiVersion": self.target.resource_api_version, "kind": "DeviceClass",
            "metadata": {"name": device_class.name, "labels": {**_MANAGED,
                                                               "app.kubernetes.io/component": "tenant-device-class"}},
            "spec": spec,
        })

    def use_kueue(self, device_classes: Sequence[TenantDeviceClass]) -> None:
        """Map ``device_classes`` in the Kueue configuration and emit the ResourceFlavor (once)."""
        if not self._kueue_classes and self._kueue_config_map is None:
            _api_object(self, "resource-flavor", resource_flavor(self.flavor, self._flavor_node_labels))
        for device_class in device_classes:
            self._kueue_classes[device_class.name] = device_class.kueue_resource
            if device_class.counter is not None:
                self._kueue_counters[device_class.kueue_resource] = device_class.counter
        configuration = self.kueue_configuration()  # validates the mappings as Kueue does
        if self._kueue_config_namespace is None:
            return
        data = {"deviceClassMappings.yaml": yaml.safe_dump(configuration, sort_keys=False)}
        if self._kueue_config_map is None:
            self._kueue_config_map = _api_object(self, "kueue-configuration", {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "dra-constructs-kueue-device-class-mappings",
                             "namespace": self._kueue_config_namespace,
                             "labels": {**_MANAGED, "dra-constructs.io/component": KUEUE_CONFIG_COMPONENT,
                                        KUEUE_VERSION_LABEL: str(self.kueue_version)}},
                "data": data,
            })
        else:
            self._kueue_config_map.add_json_patch(cdk8s.JsonPatch.replace("/data", data))

    def kueue_configuration(self) -> dict[str, Any]:
        """The ``Configuration`` snippet (``resources.deviceClassMappings``) the tenants' queues rely on."""
        return kueue_configuration(device_class_mappings(self._kueue_classes, self.node.path, self._kueue_counters),
                                   self.kueue_version)


class _Registry(constructs.Construct):
    """The App's platform and tenants, kept as a child of the App root.

    Found by a tree lookup (the same Python object comes back), so it works for Apps created on
    the JS side too, whose proxies and node addresses do not identify one App.
    """

    ID = "dra-constructs-tenancy"

    def __init__(self, root: constructs.Construct) -> None:
        super().__init__(root, self.ID)
        self.platform: TenantPlatform | None = None
        self.namespaces: set[str] = set()

    @classmethod
    def of(cls, scope: constructs.Construct) -> _Registry:
        root = scope.node.root
        found = root.node.try_find_child(cls.ID)
        if isinstance(found, _Registry):
            return found
        assert isinstance(root, constructs.Construct)
        return cls(root)


class GpuTenant(constructs.Construct):
    """One team: its Namespace, a ResourceQuota on its DRA devices, optionally its Kueue queues, and
    the guardrails admission policy plus a DeviceClass allow-list bound to its namespace.

    :param namespace: the tenant's namespace (DNS label). Default: the construct id as a DNS label.
    :param quotas: devices the tenant may hold at once, by catalog key:
        ``{Mig(GpuModel.H100_80GB, "1g.10gb"): 7, WholeGpu(GpuModel.H100_80GB): 2}`` (or a driver
        class name such as ``"mig.nvidia.com"``); ``MigSlices(model): n`` is ``n`` memory slices of
        that model in any mix of MIG profiles (Kueue counter-based quota: needs ``kueue=``,
        Kubernetes 1.35+ and DynamicMIG). Unknown models, profiles or classes raise.
    :param kueue: the tenant's queues (``KueueQueue(...)``, Kubernetes 1.34+). Default: none.
    :param platform: the shared DeviceClasses / Kueue flavor. Default: the App's (created if needed).
    :param admission: emit the guardrails admission policy and the DeviceClass allow-list bound to
        the namespace. Default True.
    :param validation_actions: the policies' binding actions. Default ``("Deny",)``.
    :param labels: extra Namespace labels (never the admin-access labels).
    :param mig_isolation: whether the tenant's MIG slices may share a physical GPU with other tenants'
        (``dra_constructs.isolation``, docs/tenants.md): ``"exclusive-gpu"`` keeps them off GPUs another
        tenant holds (the sanitizer agent's isolation taint; its claims tolerate only their own),
        ``"shared-gpu"`` packs them with other shared tenants' (its claims tolerate ``Shared``). Both
        need device taints (Kubernetes 1.33+) and the agent's ``mig_isolation`` on. Default ``None``:
        no isolation toleration (today's claims; beside exclusive tenants they get only free GPUs).
    """

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        *,
        quotas: Mapping[QuotaKey, int],
        namespace: str | None = None,
        kueue: KueueQueue | None = None,
        platform: TenantPlatform | None = None,
        admission: bool = True,
        validation_actions: Sequence[str] = ("Deny",),
        labels: Mapping[str, str] | None = None,
        kubernetes_version: str | Target | None = None,
        mig_isolation: IsolationLevel | None = None,
    ) -> None:
        super().__init__(scope, id)
        where = self.node.path
        _check_unnamespaced_chart(scope, where)
        self.target = resolve_target(scope, kubernetes_version, where)
        self.namespace = check_dns_label(where, "namespace", namespace or to_dns_label(id))
        self.mig_isolation = self._isolation(where, mig_isolation)
        registry = _Registry.of(self)
        if self.namespace in registry.namespaces:
            raise DraConstructsError(where, "namespace", self.namespace, "another GpuTenant of this App owns it",
                                     "give every tenant its own namespace")
        registry.namespaces.add(self.namespace)
        extra = check_labels(where, "labels", labels) or {}
        bad = sorted(k for k in extra if k in _ADMIN_ACCESS_LABELS or k.endswith("/admin-access"))
        if bad:
            raise DraConstructsError(where, f"labels[{bad[0]!r}]", extra[bad[0]],
                                     "a tenant namespace never allows admin-access claims (they reach every "
                                     "tenant's devices)", "run node agents that need admin access in their own "
                                     "namespace, outside any tenant")
        self.platform = platform or TenantPlatform.of(scope)
        self.kueue = kueue
        entries = resolve_quotas(quotas, where, self.platform.class_domain)
        self._classes = {device_class.name: device_class for device_class, _ in entries}
        self.quotas: dict[str, int] = {device_class.name: count for device_class, count in entries}
        self._check_counter_quotas(scope, where, quotas)
        for device_class, _ in entries:
            self.platform.ensure_class(device_class)

        isolation = {ISOLATION_LABEL: self.mig_isolation} if self.mig_isolation else {}
        _api_object(self, "namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": self.namespace,
            "labels": {**extra, **_MANAGED, TENANT_NAMESPACE_LABEL: self.namespace, **isolation}}})
        extra_devices = self._kueue_extra(where)
        # The AMD driver's class is closed for tenants with AMD quotas (others: the admission policy refuses it).
        amd = any(c.catalog_class == AMD_DEVICE_CLASS for c, _ in entries)
        closed = tuple(sorted([*DEVICE_CLASS_SELECTORS, *([AMD_DEVICE_CLASS] if amd else [])]))
        hard = resource_quota_hard([(c, n + extra_devices) for c, n in entries], self.target, closed=closed)
        _api_object(self, "quota", {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {
            "name": "gpu-devices", "namespace": self.namespace, "labels": dict(_MANAGED)}, "spec": {"hard": hard}})
        if kueue is not None:
            self._emit_kueue(kueue, entries)
        if admission:
            self._emit_admission(validation_actions)

    def _check_counter_quotas(self, scope: constructs.Construct, where: str, quotas: Mapping[QuotaKey, int]) -> None:
        """``MigSlices`` quotas are counted by Kueue on DynamicMIG counters (Kueue 0.18+, every release
        ``KueueVersion`` accepts): refuse where that cannot work."""
        counted = [k for k in quotas if isinstance(k, MigSlices)]
        if not counted:
            return
        field = f"quotas[{counted[0]!r}]"
        if self.kueue is None:
            raise DraConstructsError(
                where, field, quotas[counted[0]],
                "a quota in MIG slices is counted by Kueue (counter-based quota); a ResourceQuota counts only "
                "devices, so without Kueue nothing would hold the tenant to its slices",
                "add kueue=KueueQueue(...), or quota devices of one profile (Mig(model, profile))",
            )
        if not self.target.supports_kueue_counter_quota:
            raise DraConstructsError(
                where, field, str(self.target),
                "Kueue's counter-based quota needs Kubernetes 1.35+ (partitionable devices); the target is "
                f"{self.target}",
                "target 1.35 or later (1.35 with the DRAPartitionableDevices gate; on by default from 1.36), or quota "
                "devices of one profile (Mig(model, profile))",
            )
        mode = self.target.check_mig_mode(resolve_mig_mode(scope), where)
        if mode != "dynamic":
            raise DraConstructsError(
                where, field, mode,
                "Kueue charges MIG slices from the counters DynamicMIG devices consume; pre-created (static) MIG "
                "devices consume none, so Kueue would mark every workload inadmissible",
                "run the NVIDIA driver with DynamicMIG and declare it (set_mig_mode(app, 'dynamic'); the default "
                "from 1.36), or quota devices of one profile (Mig(model, profile))",
            )

    def _isolation(self, where: str, level: Any) -> IsolationLevel | None:
        if level is None:
            return None
        if level not in LEVELS:
            raise DraConstructsError(where, "mig_isolation", level, "not an isolation level",
                                     f"use one of {', '.join(LEVELS)}, or None")
        if self.target.device_taint_rule_api_version is None or not self.target.has_request_tolerations:
            raise DraConstructsError(
                where, "mig_isolation", level,
                f"MIG isolation is enforced with device taints (DeviceTaintRule), which Kubernetes {self.target} "
                "does not have", "target 1.33 or later (set_kubernetes_version(app, '1.33')), or drop mig_isolation")
        return level  # type: ignore[no-any-return]

    @property
    def isolation_tolerations(self) -> tuple[DeviceToleration, ...]:
        """The device tolerations the tenant's requests carry for its ``mig_isolation`` (empty: none)."""
        if self.mig_isolation is None:
            return ()
        return tuple(DeviceToleration(key=t["key"], operator=t["operator"], value=t["value"])
                     for t in tolerations_for(self.mig_isolation, self.namespace))

    def _kueue_extra(self, where: str) -> int:
        if self.kueue is None:
            return 0
        if not self.target.supports_kueue_dra:
            raise DraConstructsError(
                where, "kueue", self.kueue,
                f"Kueue's DRA integration needs resource.k8s.io/v1 (Kubernetes 1.34+); the target is {self.target}",
                "target 1.34 or later (set_kubernetes_version(app, '1.34')), or drop kueue=",
            )
        limit = self.kueue.borrowing_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise DraConstructsError(where, "kueue.borrowing_limit", limit, "must be a whole number >= 0 (the "
                                     "ResourceQuota is raised by it, and cannot express 'unlimited')",
                                     "give the most devices of each kind the tenant may borrow, e.g. 0 or 2")
        if limit and self.kueue.cohort is None:
            raise DraConstructsError(where, "kueue.borrowing_limit", limit, "borrowing needs a cohort",
                                     "set cohort=... or borrowing_limit=0")
        return limit

    def _emit_kueue(self, kueue: KueueQueue, entries: list[tuple[TenantDeviceClass, int]]) -> None:
        where = self.node.path
        self.platform.use_kueue([c for c, _ in entries])
        cq_name = check_dns_subdomain(where, "kueue.cluster_queue", kueue.cluster_queue or f"{self.namespace}-gpu")
        check_dns_label(where, "kueue.local_queue", kueue.local_queue)
        if kueue.cohort is not None:
            check_dns_subdomain(where, "kueue.cohort", kueue.cohort)
        # A counter resource borrows the memory of borrowing_limit more slices.
        borrow = {c.kueue_resource: c.counter.nominal(kueue.borrowing_limit)
                  for c, _ in entries if c.counter is not None}
        _api_object(self, "cluster-queue", cluster_queue(
            cq_name, namespace=self.namespace, flavor=self.platform.flavor,
            device_quotas=[(c.kueue_resource, c.kueue_quota(n)) for c, n in entries], cohort=kueue.cohort,
            borrowing_limit=kueue.borrowing_limit, other_quotas=dict(kueue.other_quotas), labels=dict(_MANAGED),
            borrowing_limits=borrow))
        _api_object(self, "local-queue", local_queue(kueue.local_queue, self.namespace, cq_name, dict(_MANAGED)))

    def _emit_admission(self, validation_actions: Sequence[str]) -> None:
        GuardrailsAdmissionPolicy(self, "guardrails", name=f"dra-guardrails-{self.namespace}",
                                  rules=POLICY_RULES, validation_actions=validation_actions,
                                  excluded_namespaces=(), namespaces=(self.namespace,))
        labels = {**_MANAGED, "app.kubernetes.io/component": "guardrails"}
        for manifest in device_class_policy_manifests(f"dra-tenant-{self.namespace}-device-classes",
                                                      self.namespace, sorted(self._classes), labels,
                                                      validation_actions,
                                                      exclusive_gpu=self.mig_isolation == "exclusive-gpu"):
            suffix = "binding" if manifest["kind"].endswith("Binding") else "policy"
            _api_object(self, f"device-classes-{suffix}", manifest)

    # --- for the tenant's workloads ---------------------------------------------------------

    @property
    def queue_labels(self) -> dict[str, str]:
        """Labels that put a workload into the tenant's LocalQueue (empty without Kueue)."""
        return {QUEUE_NAME_LABEL: self.kueue.local_queue} if self.kueue is not None else {}

    def device_class(self, key: QuotaKey) -> str:
        """The DeviceClass the tenant's claims use for ``key`` (which its quota must name)."""
        from dra_constructs.tenants.quota import device_class_for

        device_class = device_class_for(key, self.node.path, self.platform.class_domain)
        if device_class.name not in self._classes and isinstance(key, Mig):
            # A quota in slices of the model admits every profile of it (the request pins the profile).
            slices = device_class_for(MigSlices(key.gpu), self.node.path, self.platform.class_domain)
            if slices.name in self._classes:
                return slices.name
        if device_class.name not in self._classes:
            raise DraConstructsError(self.node.path, "key", key, f"tenant {self.namespace!r} has no quota for it",
                                     f"use one of {sorted(self._classes)}, or add it to quotas=")
        return device_class.name

    def claim_template(
        self, scope: constructs.Construct, id: str, key: Mig | WholeGpu | AmdPartition | AmdGpu, *, count: int = 1,
        request_name: str | None = None, selectors: Sequence[str] = (), **kwargs: Any,
    ) -> GpuClaimTemplate:
        """A ResourceClaimTemplate in the tenant's namespace for ``count`` devices of ``key``.

        It names the tenant's DeviceClass (so the quota counts it) and keeps the catalog pins as
        selectors; with Kueue it is built ``kueue_compatible``.
        """
        class_name = self.device_class(key)
        request: MigRequest | GpuRequest | AmdPartitionRequest | AmdGpuRequest
        if isinstance(key, AmdPartition):
            # The isolation taint is the NVIDIA agent's; the toleration keeps every request of the tenant alike
            # (its own policy asks it of each), and tolerates nothing on AMD devices.
            request = AmdPartitionRequest(name=request_name or "partition", gpu=key.gpu, profile=key.profile,
                                          count=count, selectors=tuple(selectors), device_class_name=class_name,
                                          tolerations=self.isolation_tolerations)
        elif isinstance(key, AmdGpu):
            request = AmdGpuRequest(name=request_name or "gpu", models=(key.gpu,), count=count,
                                    selectors=tuple(selectors), device_class_name=class_name,
                                    tolerations=self.isolation_tolerations)
        elif isinstance(key, Mig):
            request = MigRequest(name=request_name or "mig", gpu=key.gpu, profile=key.profile, count=count,
                                 selectors=tuple(selectors), device_class_name=class_name,
                                 tolerations=self.isolation_tolerations)
        elif isinstance(key, WholeGpu) and key.gpu is not None:  # DynamicMIG: gpu-N is tainted with its slices
            request = GpuRequest(name=request_name or "gpu", models=(key.gpu,), count=count,
                                 selectors=tuple(selectors), device_class_name=class_name,
                                 tolerations=self.isolation_tolerations)
        else:
            raise DraConstructsError(self.node.path, "key", key, "claim_template needs a catalog model",
                                     "use Mig(GpuModel..., 'profile') or WholeGpu(GpuModel...)")
        kwargs.setdefault("namespace", self.namespace)
        if self.kueue is not None:
            kwargs.setdefault("kueue_compatible", True)
        return GpuClaimTemplate(scope, id, requests=[request], **kwargs)
