"""DRA007: old or removed DRA API shapes, each reported with the shape to use instead."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import CLASSIC, POD, RESOURCE_API
from dra_constructs.guardrails.manifest import Manifest, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE"]

_ALPHA_VERSIONS = frozenset({"v1alpha1", "v1alpha2", "v1alpha3"})
#: Kinds of classic DRA (1.26-1.30) that no longer exist in any served version.
_REMOVED_KINDS = {
    "ResourceClass": "a DeviceClass (resource.k8s.io) with CEL selectors",
    "ResourceClaimParameters": "requests with CEL selectors inside the claim",
    "ResourceClassParameters": "DeviceClass selectors and config",
    "PodSchedulingContext": "nothing: the scheduler allocates structured claims itself",
    "PodScheduling": "nothing: the scheduler allocates structured claims itself",
}
#: Claim-spec fields of v1alpha2 classic DRA.
_CLASSIC_FIELDS = {
    "resourceClassName": "devices.requests[].deviceClassName",
    "parametersRef": "devices.requests[].selectors (CEL)",
    "allocationMode": "nothing: the scheduler allocates a claim while scheduling the first pod that uses it, "
                      "on that pod's node (a template's claim is per pod; a shared ResourceClaim pins its pods "
                      "to the first one's node); topology: constraints[].matchAttribute",
    "controller": "nothing: the field was removed in 1.32",
}
_REMOVED_MODES = frozenset({"WaitForFirstConsumer", "Immediate"})
#: What takes the place of WaitForFirstConsumer with structured parameters.
_INSTEAD_OF_WAIT = ("the scheduler allocates a claim while it schedules the first pod that uses it, on that "
                    "pod's node; a ResourceClaimTemplate's claim is created per pod, while a standalone "
                    "ResourceClaim shared by several pods pins them all to the node of the first")
_WAIT_FIX = ("use allocationMode: ExactCount with count: N; use a ResourceClaimTemplate for per-pod devices; "
             "to keep devices on one NUMA node or PCIe root add constraints: [{matchAttribute: "
             "resource.kubernetes.io/numaNode}] (GpuClaimTemplate(align=[Alignment(on='numaNode')]))")


#: API groups of classic-DRA driver parameters (claim ``parametersRef`` targets), gone with classic DRA.
_CLASSIC_PARAMETER_GROUPS = frozenset({"gpu.resource.nvidia.com"})


def _api_hits(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    if m.group in _CLASSIC_PARAMETER_GROUPS and m.kind.endswith("Parameters"):
        yield Hit("kind", f"{m.kind} ({m.api_version}) holds classic-DRA claim parameters: classic DRA was removed "
                          "in 1.31 and current NVIDIA drivers have no such resource",
                  fix="put selectors (CEL) and opaque config (resource.nvidia.com/v1beta1 GpuConfig) into the "
                      "ResourceClaimTemplate itself")
        return
    if not m.is_resource_api:
        return
    if m.kind in _REMOVED_KINDS:
        yield Hit("kind", f"{m.kind} ({m.api_version}) was removed with classic DRA; use {_REMOVED_KINDS[m.kind]}")
        return
    if m.version in _ALPHA_VERSIONS and m.kind != "DeviceTaintRule":
        yield Hit("apiVersion", f"{m.kind} uses {m.api_version}, an alpha API that 1.32+ clusters do not serve "
                                "by default and that later releases removed",
                  fix=f"write apiVersion: {ctx.target.resource_api_version} (the shape for Kubernetes {ctx.target})")


def _claim_hits(m: Manifest) -> Iterator[Hit]:
    if m.claim_spec is None:
        return
    spec, base = m.claim_spec
    for key, instead in _CLASSIC_FIELDS.items():
        if key in spec:
            yield Hit(field_path(base, key), f"{key} is a field of the removed v1alpha2 claim API; use {instead}")
    wrapped_version = m.version in ("v1beta2", "v1")
    for i, raw in enumerate(as_list(as_dict(spec.get("devices")).get("requests"))):
        request = as_dict(raw)
        path = field_path(base, "devices", "requests", i)
        for view in (request, as_dict(request.get("exactly"))):
            mode = view.get("allocationMode")
            if isinstance(mode, str) and mode in _REMOVED_MODES:
                yield Hit(field_path(path, "allocationMode"),
                          f"allocationMode {mode!r} does not exist since 1.31: {_INSTEAD_OF_WAIT}",
                          fix=_WAIT_FIX)
        if wrapped_version and "deviceClassName" in request:
            yield Hit(path, f"request uses the flat v1beta1 shape under {m.api_version}",
                      fix="move deviceClassName, selectors, allocationMode and count under exactly:")
        if m.version == "v1beta1" and "exactly" in request:
            yield Hit(field_path(path, "exactly"), "exactly: exists only from v1beta2; v1beta1 requests are flat",
                      fix="put deviceClassName, selectors, allocationMode and count on the request itself, "
                          "or use apiVersion resource.k8s.io/v1beta2 or v1")


def _pod_hits(m: Manifest) -> Iterator[Hit]:
    for path, entry in m.pod_claims():
        if "source" in entry:
            yield Hit(field_path(path, "source"),
                      "the pod claim source: field was removed in 1.31 (1.32 rejects it)",
                      fix="write resourceClaimTemplateName / resourceClaimName directly on the resourceClaims entry")


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    yield from _api_hits(m, ctx)
    yield from _claim_hits(m)
    yield from _pod_hits(m)


RULE = Rule(
    id="DRA007",
    name="no-removed-api-shapes",
    severity=Severity.ERROR,
    why="classic-DRA and alpha shapes (v1alpha2/v1alpha3 claims, pod claim source:, WaitForFirstConsumer) "
        "are rejected or ignored by 1.32+ API servers",
    fix="use resource.k8s.io/v1beta1 (1.32), v1beta2 (1.33) or v1 (1.34+) with ExactCount requests and "
        "inline resourceClaimTemplateName in pods; instead of WaitForFirstConsumer nothing is needed (a claim "
        "is allocated when its first pod is scheduled, on that pod's node) and topology alignment is "
        "constraints[].matchAttribute on resource.kubernetes.io/numaNode or pcieRoot",
    object_check=_check,
    # facets: classic parameter kinds (group gpu.resource.nvidia.com), resource.k8s.io kinds and claim
    # specs (is_resource_api), its pods' claims
    fires_on=CLASSIC | RESOURCE_API | POD,
)
