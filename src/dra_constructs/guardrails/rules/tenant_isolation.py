"""DRA013: claims of a tenant never share a device with another tenant (consumable capacity, admin access)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.manifest import Manifest, as_dict, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.tenancy import tenancy

__all__ = ["RULE"]


def _shared_by_class(ctx: AuditContext, class_name: str) -> bool:
    device_class = ctx.device_class(class_name)
    if device_class is None:
        return False
    return "allowMultipleAllocations" in repr(as_dict(device_class.obj.get("spec")).get("selectors"))


def _claim_hits(ctx: AuditContext, m: Manifest) -> Iterator[Hit]:
    for request in m.requests():
        label = f"request {request.name!r}"
        capacity = as_dict(request.fields.get("capacity")).get("requests")
        if capacity:
            yield Hit(field_path(request.path, "capacity", "requests"),
                      f"{label} asks for a share of a device's capacity (consumable capacity): the device is "
                      "allocated to other claims at the same time, including other tenants'")
        for path, expression in request.selectors():
            if isinstance(expression, str) and "allowMultipleAllocations" in expression:
                yield Hit(path, f"{label} selects devices that allow multiple allocations: other tenants' "
                                "claims get the same device")
        if request.admin_access:
            yield Hit(field_path(request.path, "adminAccess"),
                      f"{label} asks for admin access: it reaches devices already allocated to other tenants")
        if request.device_class_name and _shared_by_class(ctx, request.device_class_name):
            yield Hit(field_path(request.path, "deviceClassName"),
                      f"{label} uses DeviceClass {request.device_class_name!r}, whose devices allow multiple "
                      "allocations: other tenants' claims get the same device")


def _claims_of_other_tenants(ctx: AuditContext, m: Manifest) -> Iterator[Hit]:
    """A tenant workload naming a ResourceClaim that exists only in another tenant's namespace."""
    index = tenancy(ctx)
    for path, entry in m.pod_claims():
        name = entry.get("resourceClaimName")
        if not isinstance(name, str) or ctx.claim(m.namespace, name) is not None:
            continue
        owners = sorted({c.namespace for c in ctx.claims_named(name)
                         if c.namespace and c.namespace != m.namespace and index.is_tenant_namespace(c.namespace)})
        if owners:
            yield Hit(field_path(path, "resourceClaimName"),
                      f"ResourceClaim {name!r} belongs to tenant namespace(s) {', '.join(owners)}: the workload can "
                      "only get its devices by sharing another tenant's claim")


def _check(ctx: AuditContext) -> Iterator[tuple[Manifest | Sequence[Manifest], Hit]]:
    index = tenancy(ctx)
    admin_labels = ctx.target.admin_access_namespace_labels
    for m, members in ctx.groups:  # (a workload's claims and namespace are its shape's)
        if m.kind == "Namespace" and index.is_tenant_namespace(m.name):
            for key in sorted(set(admin_labels) | {"resource.k8s.io/admin-access",
                                                    "resource.kubernetes.io/admin-access"}):
                if m.labels().get(key) == "true":
                    yield m, Hit(field_path("metadata", "labels", key),
                                 f"tenant namespace {m.name!r} allows admin-access claims, which reach every "
                                 "tenant's devices")
        elif m.is_resource_api and m.kind in ("ResourceClaim", "ResourceClaimTemplate") \
                and index.is_tenant_namespace(m.namespace):
            for hit in _claim_hits(ctx, m):
                yield m, hit
        elif m.pods and m.namespace and index.is_tenant_namespace(m.namespace):
            for hit in _claims_of_other_tenants(ctx, m):
                yield members, hit


RULE = Rule(
    id="DRA013",
    name="tenant-exclusive-devices",
    severity=Severity.ERROR,
    why="a tenant's devices must be its own: consumable capacity, devices that allow multiple allocations, "
        "admin access and another tenant's ResourceClaim all hand one physical GPU to several tenants, with no "
        "barrier between them",
    fix="claim whole devices or MIG slices exclusively (ExactCount, no capacity.requests, no adminAccess); "
        "run node agents that need admin access outside tenant namespaces",
    set_check=_check,
)
