"""Turn manifests into fit inputs: claims, DeviceClasses, slices, nodes, allocated devices, gates."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dra_constructs.catalog.driver import DEVICE_CLASS_SELECTORS
from dra_constructs.catalog.network import NIC_CLASS_SELECTORS
from dra_constructs.errors import DraConstructsError
from dra_constructs.fit.allocator import AllocatedState
from dra_constructs.fit.model import Claim, DeviceClass, Node, claim_from_spec, quantity
from dra_constructs.target import Target

if TYPE_CHECKING:
    from dra_constructs.guardrails.manifest import Manifest

__all__ = ["ClaimSource", "FitInputs", "PodGroup", "check_selectors", "collect", "default_device_classes",
           "feature_gates", "pod_groups"]


def default_device_classes() -> dict[str, DeviceClass]:
    """The NVIDIA driver's DeviceClasses (Helm chart) and DraNet's ``dranet``, unless the inputs define them."""
    known = {**DEVICE_CLASS_SELECTORS, **NIC_CLASS_SELECTORS}
    return {name: DeviceClass(name, (selector,)) for name, selector in known.items()}


def feature_gates(text: str | None, target: Target, where: str = "--feature-gates") -> dict[str, bool]:
    """The target's default DRA gates, overridden by kube-scheduler syntax ``A=true,B=false``."""
    gates = dict(target.default_feature_gates)
    if not text:
        return gates
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise DraConstructsError(where, "feature gate", item, "not NAME=true or NAME=false",
                                     "write --feature-gates DRAPartitionableDevices=true,DRADeviceTaints=false")
        if name not in target.known_feature_gates:
            raise DraConstructsError(where, "feature gate", name, "not a DRA feature gate the allocator reads",
                                     f"use one of {', '.join(sorted(target.known_feature_gates))}")
        gates[name] = value == "true"
    return gates


@dataclass(frozen=True)
class ClaimSource:
    """The object a claim of :attr:`FitInputs.claims` comes from."""

    kind: str
    namespace: str
    name: str
    where: str  # ``Kind/namespace/name``
    spec_path: str  # ``spec`` (ResourceClaim) or ``spec.spec`` (ResourceClaimTemplate)


@dataclass(frozen=True)
class PodGroup:
    """Claims allocated together: those one Pod (of a workload) uses, or the unreferenced ones of a namespace."""

    label: str
    claims: tuple[Claim, ...]


@dataclass
class FitInputs:
    """Everything ``fit`` reads, grouped by role (``sources[i]`` is where ``claims[i]`` comes from)."""

    claims: list[Claim] = field(default_factory=list)
    sources: list[ClaimSource] = field(default_factory=list)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    taint_rules: list[dict[str, Any]] = field(default_factory=list)
    allocated: AllocatedState = field(default_factory=AllocatedState)


def _where(obj: Mapping[str, Any]) -> str:
    metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(metadata, dict)
    name = metadata.get("name") or "<unnamed>"
    namespace = metadata.get("namespace")
    return f"{obj.get('kind')}/{namespace + '/' if namespace else ''}{name}"


def _class(obj: Mapping[str, Any]) -> DeviceClass:
    where = _where(obj)
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    selectors = []
    for index, selector in enumerate(spec.get("selectors") or []):
        expression = (selector.get("cel") or {}).get("expression") if isinstance(selector, dict) else None
        if not isinstance(expression, str):
            raise DraConstructsError(where, f"spec.selectors[{index}].cel.expression", selector,
                                     "a DeviceClass selector needs a CEL expression",
                                     "write selectors: [{cel: {expression: ...}}]")
        selectors.append(expression)
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        raise DraConstructsError(where, "metadata.name", name, "a DeviceClass needs a name", "set metadata.name")
    return DeviceClass(name, tuple(selectors))


def _allocated(obj: Mapping[str, Any], state: AllocatedState) -> None:
    """Record one ResourceClaim's ``status.allocation`` as ``foreachAllocatedDevice`` does.

    Upstream ``pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go``: admin-access
    results are skipped; a result with a ``shareID`` is a share (its ``consumedCapacity`` adds to the
    device's, several shares sum); any other result, ``consumedCapacity`` or not, is dedicated.
    """
    where = _where(obj)
    allocation = ((obj.get("status") or {}).get("allocation") or {}) if isinstance(obj.get("status"), dict) else {}
    results = ((allocation.get("devices") or {}).get("results") or []) if isinstance(allocation, dict) else []
    for index, result in enumerate(results):
        at = f"status.allocation.devices.results[{index}]"
        if not isinstance(result, dict) or result.get("adminAccess"):
            continue  # admin access does not take the device (the scheduler skips such results)
        try:
            device_id = f"{result['driver']}/{result['pool']}/{result['device']}"
        except KeyError as missing:
            raise DraConstructsError(where, at, result, f"an allocation result needs {missing}",
                                     "pass ResourceClaims as the API returns them") from None
        share_id = result.get("shareID")
        if share_id is None:
            state.devices.add(device_id)
            continue
        if not isinstance(share_id, str) or not share_id:
            raise DraConstructsError(where, f"{at}.shareID", share_id, "a shareID is a non-empty UID string",
                                     "pass ResourceClaims as kubectl prints them (shareID: <uid>)")
        state.shares.setdefault(device_id, set()).add(share_id)
        consumed = result.get("consumedCapacity")
        if consumed is None:
            continue
        if not isinstance(consumed, dict):
            raise DraConstructsError(where, f"{at}.consumedCapacity", consumed,
                                     "consumedCapacity maps capacity names to quantities",
                                     "write consumedCapacity: {memory: 10Gi}")
        used = state.capacity.setdefault(device_id, {})
        for name, value in consumed.items():
            field_name = f"{at}.consumedCapacity.{name}"
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise DraConstructsError(where, field_name, value, "not a Kubernetes quantity",
                                         'write a quantity such as "1", "14" or "80Gi"')
            amount = quantity(str(value), where, field_name)
            if amount < 0:
                raise DraConstructsError(where, field_name, value, "a consumed capacity cannot be negative",
                                         "pass the amount the allocation recorded (0 or more)")
            used[str(name)] = used.get(str(name), 0) + amount


def collect(manifests: Iterable[Mapping[str, Any]], slices: Iterable[Mapping[str, Any]],
            allocated: Iterable[Mapping[str, Any]] = ()) -> FitInputs:
    """Claims and classes from the manifests; slices, classes, nodes and taint rules from slice files.

    A ResourceClaimTemplate stands for one claim (of the Pod); an allocated ResourceClaim among the
    manifests is still allocated again (``fit`` asks whether the claims *could* be allocated).
    """
    inputs = FitInputs()
    names: dict[str, int] = {}
    for obj in list(manifests) + list(slices):
        kind = obj.get("kind")
        if kind == "DeviceClass":
            device_class = _class(obj)
            inputs.classes[device_class.name] = device_class
    for obj in manifests:
        kind = obj.get("kind")
        if kind not in ("ResourceClaim", "ResourceClaimTemplate"):
            continue
        where = _where(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        assert isinstance(spec, dict)
        if kind == "ResourceClaimTemplate":
            spec = spec.get("spec") if isinstance(spec.get("spec"), dict) else {}
        metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(metadata, dict)
        name = str(metadata.get("name") or f"claim-{len(inputs.claims)}")
        names[name] = names.get(name, 0) + 1
        if names[name] > 1:
            name = f"{metadata.get('namespace') or 'default'}/{name}#{names[name]}"
        assert isinstance(spec, dict)
        inputs.claims.append(claim_from_spec(name, spec, where))
        inputs.sources.append(ClaimSource(str(kind), str(metadata.get("namespace") or ""),
                                          str(metadata.get("name") or ""), where,
                                          "spec.spec" if kind == "ResourceClaimTemplate" else "spec"))
    for obj in slices:
        kind = obj.get("kind")
        if kind == "ResourceSlice":
            inputs.slices.append(dict(obj))
        elif kind == "Node":
            metadata = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            assert isinstance(metadata, dict)
            labels = metadata.get("labels") if isinstance(metadata.get("labels"), dict) else {}
            assert isinstance(labels, dict)
            name = str(metadata.get("name") or "")
            node_labels = {"kubernetes.io/hostname": name, **{str(k): str(v) for k, v in labels.items()}}
            inputs.nodes.append(Node(name, node_labels))
        elif kind == "DeviceTaintRule":
            inputs.taint_rules.append(dict(obj))
        elif kind == "ResourceClaim":
            _allocated(obj, inputs.allocated)
    for obj in allocated:
        if obj.get("kind") == "ResourceClaim":
            _allocated(obj, inputs.allocated)
    return inputs


def check_selectors(inputs: FitInputs, target: Target) -> None:
    """Compile every claim's and DeviceClass's selectors for ``target``; a bad one names its object and field."""
    from dra_constructs.cel.matching import selector_matcher

    def compiled(where: str, field_name: str, expression: str) -> None:
        try:
            selector_matcher(expression, target)
        except DraConstructsError as error:
            raise DraConstructsError(where, field_name, expression, error.problem, error.fix) from None

    for claim, source in zip(inputs.claims, inputs.sources, strict=True):
        for request in claim.requests:
            for sub in request.alternatives:
                at = f"{source.spec_path}.devices.requests[{request.name!r}]"
                if request.first_available:
                    at += f".firstAvailable[{sub.name!r}]"
                for i, expression in enumerate(sub.selectors):
                    compiled(source.where, f"{at}.selectors[{i}].cel.expression", expression)
    for device_class in inputs.classes.values():
        for i, expression in enumerate(device_class.selectors):
            compiled(f"DeviceClass/{device_class.name}", f"spec.selectors[{i}].cel.expression", expression)


def pod_groups(manifests: Sequence[Manifest], inputs: FitInputs) -> list[PodGroup]:
    """The claim sets ``fit`` allocates, each as the claims of one Pod.

    A workload (anything with a pod spec) in the manifests makes one group of the claims and templates
    its pod references in its own namespace (each template stands for the Pod's own claim). Claims no
    workload references are allocated together per namespace, never across namespaces or with a
    workload's claims: unrelated objects in one directory do not compete for one Pod's node.
    """
    index: dict[tuple[str, str, str], int] = {}
    for i, source in enumerate(inputs.sources):
        index.setdefault((source.kind, source.namespace, source.name), i)
    groups: list[PodGroup] = []
    used: set[int] = set()
    for m in manifests:
        for pod in m.pods:
            members: list[int] = []
            for _, entry in pod.claims():
                for key, kind in (("resourceClaimTemplateName", "ResourceClaimTemplate"),
                                  ("resourceClaimName", "ResourceClaim")):
                    ref = entry.get(key)
                    if isinstance(ref, str):
                        found = index.get((kind, m.namespace, ref))
                        if found is None and not m.namespace:
                            found = next((i for (k, _, n), i in index.items() if k == kind and n == ref), None)
                        if found is not None and found not in members:
                            members.append(found)
            if members:
                used.update(members)
                groups.append(PodGroup(m.object_id, tuple(inputs.claims[i] for i in members)))
    rest: dict[str, list[int]] = {}
    for i, source in enumerate(inputs.sources):
        if i not in used:
            rest.setdefault(source.namespace, []).append(i)
    for namespace, members in rest.items():
        label = f"claims of namespace {namespace}" if namespace else "claims without a namespace"
        groups.append(PodGroup(label, tuple(inputs.claims[i] for i in members)))
    return groups
