"""Kueue objects for a tenant (ResourceFlavor, ClusterQueue, LocalQueue), the ``deviceClassMappings``
configuration they rely on, and what Kueue refuses in a ResourceClaimTemplate (pure Python).

Sources: kubernetes-sigs/kueue v0.18.0-v0.19.2 and main at ff69552e (2026-08-22):
``apis/config/v1beta2/configuration_types.go`` (``Resources.DeviceClassMappings``, ``sources[].counter``
``{name, driver, deviceSelector}``), ``pkg/config/validation.go`` (``validateDeviceClassMappings``: at
most 16 mappings, 8 classes each, label-key names, one mapping per class; a counter name is a DNS
label, its driver a DNS subdomain of at most 63 characters, its ``deviceSelector.cel.expression``
required and compiled), ``pkg/dra/claims.go`` (``countDevicesPerClass``: ``firstAvailable``,
``adminAccess`` and ``All`` are refused in every release; ``constraints`` and per-claim ``config``
only through 0.18, commit 444f0dedd9 admits them in 0.19), ``pkg/dra/counters.go`` (counter charges)
and ``site/content/en/docs/concepts/dynamic_resource_allocation.md``. The object shapes are
``kueue.x-k8s.io/v1beta2`` (the CRDs' storage version); tests validate them against Kueue's CRD schemas.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dra_constructs.cel.inventory import Device
from dra_constructs.errors import DraConstructsError
from dra_constructs.target import Target
from dra_constructs.tenants.kueue_versions import KueueVersion
from dra_constructs.tenants.quota import CounterQuota

__all__ = [
    "KUEUE_API_VERSION",
    "KUEUE_CONFIG_API_VERSION",
    "MAX_DEVICE_CLASS_MAPPINGS",
    "QUEUE_NAME_LABEL",
    "check_kueue_admissible",
    "cluster_queue",
    "device_class_mappings",
    "kueue_configuration",
    "kueue_counter_charge",
    "kueue_inadmissible",
    "local_queue",
    "resource_flavor",
]

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
KUEUE_CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
#: The label that puts a Job, Deployment, ... into a LocalQueue.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
MAX_DEVICE_CLASS_MAPPINGS = 16  # validateDeviceClassMappings
MAX_CLASSES_PER_MAPPING = 8
MAX_COVERED_RESOURCES = 64  # ClusterQueue resourceGroups[].coveredResources maxItems

_LABEL_KEY_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _is_label_key(value: str) -> bool:
    prefix, slash, name = value.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_KEY_NAME.match(name))


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def kueue_inadmissible(claim_spec: Mapping[str, Any], base: str = "spec",
                       kueue_version: KueueVersion | str | None = "0.18") -> Iterator[tuple[str, str]]:
    """``(field path, reason)`` for everything in a ResourceClaimSpec that Kueue does not admit.

    Reads every ``resource.k8s.io`` version (v1beta1 flat requests are what v1 calls ``exactly``).
    ``kueue_version``: 0.18 (the default, the oldest supported: what no supported release admits)
    also refuses ``constraints`` and per-claim ``config``, which 0.19 admits.
    """
    version = KueueVersion.parse(kueue_version, "kueue_inadmissible")
    devices = _as_dict(claim_spec.get("devices"))
    for i, raw in enumerate(_as_list(devices.get("requests"))):
        request = _as_dict(raw)
        path = f"{base}.devices.requests[{i}]"
        label = f"request {request.get('name')!r}"
        if "firstAvailable" in request:
            yield f"{path}.firstAvailable", f"{label} lists firstAvailable alternatives"
            continue
        body = _as_dict(request.get("exactly")) if "exactly" in request else request
        at = f"{path}.exactly" if "exactly" in request else path
        if body.get("adminAccess") is True:
            yield f"{at}.adminAccess", f"{label} asks for admin access"
        mode = body.get("allocationMode", "ExactCount")
        if mode != "ExactCount":
            yield f"{at}.allocationMode", f"{label} uses allocationMode {mode!r} (only ExactCount is admitted)"
        if not isinstance(body.get("deviceClassName"), str) or not body.get("deviceClassName"):
            yield f"{at}.deviceClassName", f"{label} names no DeviceClass"
    if version.minor >= 19:  # 444f0dedd9: constraints and config are admitted (not counted) from 0.19
        return
    if _as_list(devices.get("constraints")):
        yield f"{base}.devices.constraints", "the claim has constraints (matchAttribute; Kueue 0.19 admits them)"
    if _as_list(devices.get("config")):
        yield (f"{base}.devices.config", "the claim carries per-claim device config (put it on the DeviceClass; "
               "Kueue 0.19 admits it)")


def check_kueue_admissible(claim_spec: Mapping[str, Any], target: Target, where: str,
                           kueue_version: KueueVersion | str | None = "0.18") -> None:
    """Raise a DraConstructsError naming the first thing in ``claim_spec`` Kueue would not admit."""
    if not target.supports_kueue_dra:
        raise DraConstructsError(
            where, "kueue_compatible", True,
            f"Kueue's DRA integration needs resource.k8s.io/v1 (Kubernetes 1.34+); the target is {target}",
            "target 1.34 or later (set_kubernetes_version(app, '1.34')), or turn kueue_compatible off",
        )
    for path, reason in kueue_inadmissible(claim_spec, kueue_version=kueue_version):
        raise DraConstructsError(
            where, path, "kueue_compatible=True", f"Kueue does not admit this claim: {reason}",
            "use one exactly/ExactCount request per kind of device, no FirstAvailable, no constraints, no admin "
            "access; put device config (e.g. a preemption policy) on the DeviceClass (TenantPlatform("
            "device_config=...)) instead of the claim",
        )


def _counter_source(resource: str, counter: CounterQuota, where: str) -> dict[str, Any]:
    """``sources[].counter`` of a mapping, checked as ``validateDeviceClassMappings`` does."""
    field = f"deviceClassMappings[{resource!r}].sources[0].counter"
    name_ok = len(counter.counter) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", counter.counter)
    if not name_ok:
        raise DraConstructsError(where, f"{field}.name", counter.counter, "not a DNS label (Kueue refuses it)",
                                 "name a counter the driver publishes in consumesCounters, e.g. 'memory'")
    if len(counter.driver) > 63 or not _SUBDOMAIN.match(counter.driver):
        raise DraConstructsError(where, f"{field}.driver", counter.driver,
                                 "not a DNS subdomain of at most 63 characters (Kueue refuses it)",
                                 "name the DRA driver as its ResourceSlices do, e.g. 'gpu.nvidia.com'")
    if not counter.device_selector:
        raise DraConstructsError(where, f"{field}.deviceSelector.cel.expression", counter.device_selector,
                                 "Kueue requires a deviceSelector", "select the devices the quota is for")
    return {"counter": {"name": counter.counter, "driver": counter.driver,
                        "deviceSelector": {"cel": {"expression": counter.device_selector}}}}


def device_class_mappings(classes: Mapping[str, str], where: str = "TenantPlatform",
                          counters: Mapping[str, CounterQuota] | None = None) -> list[dict[str, Any]]:
    """``resources.deviceClassMappings``: one mapping per Kueue resource name -> its DeviceClasses.

    ``classes`` maps DeviceClass name -> Kueue resource name; ``counters`` maps a Kueue resource
    name to the counter Kueue charges for it (a ``sources`` entry: counter-based quota, Kueue
    0.18+). Checked as Kueue's config validation does.
    """
    counters = counters or {}
    by_resource: dict[str, list[str]] = {}
    for device_class, resource in classes.items():
        if not _is_label_key(resource):
            raise DraConstructsError(where, "kueue resource name", resource, "not a label key (Kueue refuses it)",
                                     "use <dns-subdomain>/<name of at most 63 characters>")
        by_resource.setdefault(resource, []).append(device_class)
    if len(by_resource) > MAX_DEVICE_CLASS_MAPPINGS:
        raise DraConstructsError(
            where, "resources.deviceClassMappings", sorted(by_resource),
            f"Kueue accepts at most {MAX_DEVICE_CLASS_MAPPINGS} deviceClassMappings",
            "quota fewer distinct MIG profiles / GPU models across the tenants of one platform",
        )
    mappings = []
    for resource in sorted(by_resource):
        names = sorted(by_resource[resource])
        if len(names) > MAX_CLASSES_PER_MAPPING:
            raise DraConstructsError(where, f"deviceClassMappings[{resource!r}].deviceClassNames", names,
                                     f"Kueue accepts at most {MAX_CLASSES_PER_MAPPING} classes per mapping",
                                     "split the classes over several resource names")
        mapping: dict[str, Any] = {"name": resource, "deviceClassNames": names}
        if resource in counters:
            mapping["sources"] = [_counter_source(resource, counters[resource], where)]
        mappings.append(mapping)
    return mappings


def kueue_features(mappings: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The Kueue features (:data:`~dra_constructs.tenants.kueue_versions.KUEUE_FEATURES`) ``mappings`` use."""
    used = {"device-class-mappings"}
    for mapping in mappings:
        for source in _as_list(mapping.get("sources")):
            if "counter" in _as_dict(source):
                used.add("counter-sources")
            if "capacity" in _as_dict(source):
                used.add("capacity-sources")
    return frozenset(used)


def kueue_configuration(mappings: Sequence[Mapping[str, Any]],
                        kueue_version: KueueVersion | str | None = None) -> dict[str, Any]:
    """The part of Kueue's ``Configuration`` (``config.kueue.x-k8s.io/v1beta2``) the tenants rely on.

    Merge ``resources.deviceClassMappings`` (and ``featureGates``, where a feature the mappings use
    is still alpha in ``kueue_version``, e.g. counter sources in 0.18) into the manager's
    configuration (ConfigMap ``kueue-manager-config``, key ``controller_manager_config.yaml``, or
    the Helm value ``managerConfig.controllerManagerConfigYaml``) and restart the manager: Kueue
    reads it at start. Gates use the names of 0.18+ (``KueueDRAIntegration*``).
    """
    version = KueueVersion.parse(kueue_version, "kueue_configuration")
    config: dict[str, Any] = {"apiVersion": KUEUE_CONFIG_API_VERSION, "kind": "Configuration"}
    gates = version.gates_for(kueue_features(mappings))
    if gates:
        config["featureGates"] = gates
    config["resources"] = {"deviceClassMappings": [dict(m) for m in mappings]}
    return config


def kueue_counter_charge(counter: str, device_selector: str, class_selectors: Sequence[str],
                         request_selectors: Sequence[str], count: int, devices: Sequence[Device],
                         target: Target | str = "1.35") -> int | None:
    """What Kueue charges a request on a counter source, in the counter's base unit (bytes for memory).

    As ``pkg/dra/counters.go`` (v0.19): the devices the source's ``deviceSelector``, the class's
    and the request's selectors all match (in that order; a run-time error makes the workload
    inadmissible, raised here), then the largest value of ``counter`` in any of their
    ``consumesCounters`` entries, times ``count``. ``None``: fewer matching devices than ``count``,
    or none consumes the counter (Kueue: inadmissible until the ResourceSlices change). ``devices``
    are those Kueue looks at: the driver's, from complete pools at their newest generation.
    """
    from dra_constructs.cel.matching import match_devices
    from dra_constructs.cel.quantity import parse_quantity

    results = match_devices([device_selector, *class_selectors], list(request_selectors), devices, target)
    errors = sorted(v for v in results.values() if isinstance(v, str))
    if errors:
        raise DraConstructsError("kueue_counter_charge", "selectors", errors[0],
                                 "a selector fails at run time on a device: Kueue marks the workload inadmissible",
                                 "guard attribute reads (the type test first, joined with &&)")
    matched = [d for d in devices if results.get(d.id) is True]
    if len(matched) < count:
        return None
    values = [parse_quantity(c[counter]).value for d in matched for _, c in d.consumes_counters if counter in c]
    if not values:
        return None
    return math.ceil(max(values)) * count  # utilmath.SafeValue: Quantity.Value() rounds up


def resource_flavor(name: str, node_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ``ResourceFlavor`` (the GPU nodes the tenants' quotas are for)."""
    spec: dict[str, Any] = {}
    if node_labels:
        spec["nodeLabels"] = dict(sorted(node_labels.items()))
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def _quota(name: str, nominal: int | str, borrowing_limit: int | str | None, cohort: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing_limit is not None and cohort:
        out["borrowingLimit"] = borrowing_limit
    return out


def cluster_queue(
    name: str,
    *,
    namespace: str,
    flavor: str,
    device_quotas: Sequence[tuple[str, int | str]],
    cohort: str | None,
    borrowing_limit: int | None,
    other_quotas: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    borrowing_limits: Mapping[str, int | str] | None = None,
) -> dict[str, Any]:
    """A ``ClusterQueue`` for one tenant namespace: the device resources in one group, others in another.

    ``borrowing_limits`` overrides ``borrowing_limit`` per resource (counter resources borrow in
    counter units, not devices).
    """
    per_resource = borrowing_limits or {}
    groups: list[dict[str, Any]] = []
    if len(device_quotas) > MAX_COVERED_RESOURCES:
        raise DraConstructsError(name, "resourceGroups[].coveredResources", len(device_quotas),
                                 f"a Kueue resource group covers at most {MAX_COVERED_RESOURCES} resources",
                                 "quota fewer kinds of devices")
    if device_quotas:
        groups.append({
            "coveredResources": [r for r, _ in device_quotas],
            "flavors": [{"name": flavor, "resources": [
                _quota(r, n, per_resource.get(r, borrowing_limit), cohort is not None) for r, n in device_quotas]}],
        })
    if other_quotas:
        names = sorted(other_quotas)
        groups.append({
            "coveredResources": names,
            "flavors": [{"name": flavor, "resources": [{"name": r, "nominalQuota": other_quotas[r]} for r in names]}],
        })
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "resourceGroups": groups,
    }
    if cohort is not None:
        spec["cohortName"] = cohort
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": metadata, "spec": spec}


def local_queue(name: str, namespace: str, cluster_queue_name: str,
                labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ``LocalQueue`` in the tenant's namespace, backed by its ClusterQueue."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": KUEUE_API_VERSION, "kind": "LocalQueue", "metadata": metadata,
            "spec": {"clusterQueue": cluster_queue_name}}
