"""DRA006: no software-only GPU sharing across tenants (TimeSlicing / MPS, shared ResourceClaims)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any

from dra_constructs._safe_load import yaml_documents
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.context import KAI_GPU_ANNOTATIONS, AuditContext, Group, tenant_of
from dra_constructs.guardrails.facets import CLASSIC, LOOSE, POD, RESOURCE_API, SHARING_CONFIG
from dra_constructs.guardrails.manifest import Manifest, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.rules.extended_resources import gpu_resource_requests

__all__ = ["KAI_SHARING_ANNOTATIONS", "RULE", "software_sharing_strategy"]

_SHARING_STRATEGIES = {"timeslicing": "TimeSlicing", "mps": "MPS"}
_SHARING_CONFIG_KEYS = {"timeSlicingConfig": "TimeSlicing", "mpsConfig": "MPS"}


def software_sharing_strategy(opaque: dict[str, Any]) -> str | None:
    """``TimeSlicing`` / ``MPS`` when an NVIDIA opaque device config shares devices in software."""
    parameters = as_dict(opaque.get("parameters"))
    api_version = parameters.get("apiVersion")
    nvidia = opaque.get("driver") == "gpu.nvidia.com" or (
        isinstance(api_version, str) and api_version.startswith("resource.nvidia.com/"))
    if not nvidia:
        return None
    sharing = as_dict(parameters.get("sharing"))
    strategy = sharing.get("strategy")
    if isinstance(strategy, str) and strategy.lower() in _SHARING_STRATEGIES:
        return _SHARING_STRATEGIES[strategy.lower()]
    for key, name in _SHARING_CONFIG_KEYS.items():
        if key in sharing:
            return name
    return None


#: KAI Scheduler (and Run:ai) fractional GPUs: pods annotated with a fraction or an amount of GPU memory
#: are packed onto one GPU (a reservation pod holds it; the workloads share memory and compute).
KAI_SHARING_ANNOTATIONS = KAI_GPU_ANNOTATIONS
#: Classic-DRA parameter objects of the NVIDIA driver (gpu.resource.nvidia.com, before 1.31).
_CLASSIC_PARAMETER_KINDS = frozenset({"GpuClaimParameters", "MigDeviceClaimParameters"})
_ALLOW_MULTIPLE = re.compile(r"device\s*\.\s*allowMultipleAllocations")
#: Extended resources of GPU-sharing device plugins: the NVIDIA plugin's time-sliced ``nvidia.com/gpu.shared``,
#: HAMi (``nvidia.com/gpumem``, ``gpucores``, ``gpumem-percentage``), Alibaba cGPU (``aliyun.com/gpu-mem``,
#: ``gpu-core``) and Volcano vGPU (``volcano.sh/vgpu-memory``, ``vgpu-cores``). DRA001 reports the name too.
_SHARED_GPU_RESOURCE = re.compile(r"/(.*gpumem.*|gpucores|gpu-mem.*|gpu-core.*|gpu\.shared|vgpu-.*)$", re.IGNORECASE)


def _consumable_capacity(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    """Claims asking for a share of a GPU, and GPUs or classes offered for several allocations (KEP-5075)."""
    for request in m.requests():
        if "capacity" in request.fields and ctx.is_gpu_class(request.device_class_name):
            yield Hit(field_path(request.path, "capacity"),
                      f"request {request.name!r} asks for a share of a {request.device_class_name} device's capacity "
                      "(consumable capacity): on GPUs that allow multiple allocations (NVIDIA --consumable-shares) "
                      "claims of other workloads and namespaces get the same GPU, with no hardware isolation")
    if not m.is_resource_api:
        return
    spec = as_dict(m.obj.get("spec"))
    if m.kind == "ResourceSlice":
        raw_driver = spec.get("driver")
        driver = raw_driver if isinstance(raw_driver, str) else ""
        for i, raw in enumerate(as_list(spec.get("devices"))):
            device = as_dict(raw)
            for path, fields in ((field_path("spec", "devices", i), device),
                                 (field_path("spec", "devices", i, "basic"), as_dict(device.get("basic")))):
                if fields.get("allowMultipleAllocations") is True and ("gpu" in driver or "nvidia" in driver):
                    yield Hit(field_path(path, "allowMultipleAllocations"),
                              f"GPU {device.get('name')!r} of driver {driver!r} allows multiple allocations: claims "
                              "of different workloads and namespaces share it with no hardware isolation")
    elif m.kind == "DeviceClass" and ctx.is_gpu_class(m.name):
        for i, selector in enumerate(as_list(spec.get("selectors"))):
            expression = as_dict(as_dict(selector).get("cel")).get("expression")
            if isinstance(expression, str) and _ALLOW_MULTIPLE.search(expression):
                yield Hit(field_path("spec", "selectors", i, "cel", "expression"),
                          f"DeviceClass {m.name!r} selects on allowMultipleAllocations: its claims may share one GPU "
                          "with claims of other namespaces, with no hardware isolation")


def _shared_gpu_resources(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for path, who, _section, name in gpu_resource_requests(m, ctx):
        if _SHARED_GPU_RESOURCE.search(name):
            yield Hit(path, f"{who} asks for {name!r}: a GPU-sharing device plugin (time-slicing, HAMi, cGPU, "
                            "vGPU) packs several pods onto one GPU with no hardware isolation")


def _scheduler_sharing(m: Manifest) -> Iterator[Hit]:
    """KAI Scheduler fractional-GPU annotations and the NVIDIA driver's classic sharing parameters."""
    for pod in m.pods:
        annotations = as_dict(pod.metadata.get("annotations"))
        base = pod.metadata_path or "metadata"
        for key in KAI_SHARING_ANNOTATIONS:
            if key in annotations:
                yield Hit(field_path(base, "annotations", key),
                          f"annotation {key}={annotations[key]!r} asks KAI Scheduler for a fraction of a GPU: pods "
                          "packed onto one GPU share its memory and compute with no hardware isolation")
    if m.kind in _CLASSIC_PARAMETER_KINDS and m.group == "gpu.resource.nvidia.com":
        strategy = as_dict(as_dict(m.obj.get("spec")).get("sharing")).get("strategy")
        if isinstance(strategy, str) and strategy.lower() in _SHARING_STRATEGIES:
            yield Hit("spec.sharing.strategy",
                      f"{m.kind} {m.name!r} configures {_SHARING_STRATEGIES[strategy.lower()]} sharing: several "
                      "workloads share one GPU's memory and compute with no hardware isolation")


def _device_plugin_sharing(m: Manifest) -> Iterator[Hit]:
    """The legacy NVIDIA device plugin's time-slicing / MPS config kept in a ConfigMap."""
    for key, value in as_dict(m.obj.get("data")).items():
        if not isinstance(value, str) or "sharing" not in value:
            continue
        try:  # the ConfigMap's text is input too: the same limits (aliases, depth) as a file
            config = next((d.value for d in yaml_documents(value, m.file or m.object_id, "data")), None)
        except DraConstructsError:
            continue
        sharing = as_dict(as_dict(config).get("sharing"))
        for mode, name in (("timeSlicing", "TimeSlicing"), ("mps", "MPS")):
            if as_dict(sharing.get(mode)).get("resources"):
                yield Hit(field_path("data", str(key)),
                          f"device-plugin config {key!r} shares GPUs with {name} replicas: tenants on one "
                          "GPU share memory and faults with no hardware isolation")


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for path, opaque in m.device_configs():
        strategy = software_sharing_strategy(opaque)
        if strategy is not None:
            yield Hit(field_path(path, "parameters", "sharing"),
                      f"{m.kind} {m.name!r} configures {strategy} sharing: several workloads share one GPU's "
                      "memory and compute with no hardware isolation")
    if m.kind == "ConfigMap" and m.api_version == "v1":
        yield from _device_plugin_sharing(m)
    yield from _consumable_capacity(m, ctx)
    yield from _scheduler_sharing(m)
    yield from _shared_gpu_resources(m, ctx)


def _shared_claims(ctx: AuditContext) -> Iterator[tuple[Sequence[Manifest], Hit]]:
    refs: dict[tuple[str, str], list[tuple[Group, str]]] = defaultdict(list)
    for group in ctx.groups:  # (claims, namespace and tenant labels are the shape's)
        m = group[0]
        for path, entry in m.pod_claims():
            claim = entry.get("resourceClaimName")
            if isinstance(claim, str) and claim:
                refs[(m.namespace, claim)].append((group, field_path(path, "resourceClaimName")))
    for (namespace, claim), users in refs.items():
        tenants = sorted({tenant_of(first)[1] for (first, _), _ in users} - {""})
        if len(tenants) > 1:
            for (_, members), path in users:
                hit = Hit(path, f"ResourceClaim {claim!r} is shared by workloads of tenants "
                                f"{', '.join(tenants)}: they use the same devices with no isolation")
                yield members, hit
        if namespace and ctx.claim(namespace, claim) is None:
            owners = sorted({c.namespace for c in ctx.claims_named(claim) if c.namespace and c.namespace != namespace})
            if owners:
                for (_, members), path in users:
                    hit = Hit(path, f"ResourceClaim {claim!r} exists in namespace(s) {', '.join(owners)}, not "
                                    f"in {namespace!r}: one claim cannot be shared across tenant namespaces")
                    yield members, hit


RULE = Rule(
    id="DRA006",
    name="no-software-sharing-across-tenants",
    severity=Severity.ERROR,
    why="TimeSlicing, MPS, consumable capacity (allowMultipleAllocations, capacity.requests) and KAI fractional "
        "GPUs share one GPU's memory between workloads without hardware isolation, and a ResourceClaim used by "
        "several tenants hands them the same device",
    fix="give each tenant its own MIG slice (deviceClassName: mig.nvidia.com, one claim per pod through a "
        "ResourceClaimTemplate); if the sharing is intended, suppress DRA006 on the object with a reason",
    object_check=_check,
    # facets: device_configs() and requests() (is_resource_api), a v1 ConfigMap's data strings holding
    # 'sharing', its pods' annotations, classic parameter kinds (group gpu.resource.nvidia.com),
    # gpu_resource_requests (pods, loose resources)
    fires_on=RESOURCE_API | SHARING_CONFIG | POD | LOOSE | CLASSIC,
    set_check=_shared_claims,
)
