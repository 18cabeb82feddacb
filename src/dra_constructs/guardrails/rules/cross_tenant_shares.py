"""DRA021: consumable shares of one GPU DeviceClass used by two tenants (the cross-object case).

DRA006 reports each claim that asks for a share of a GPU (``capacity.requests``, a selector or class
on ``allowMultipleAllocations``), one object at a time, and a suppression with a reason
("these inference pods share on purpose") silences it; DRA013 reports the same inside declared
tenant namespaces only. Neither sees that two namespaces (or two tenant labels of one namespace)
draw shares from the same class: the scheduler then puts both tenants' allocations on one physical
GPU, where nothing isolates them and the sanitizer cannot run between them (the device is never
free). This rule reports every shared-use request of such a class, on its claim or template, so each
tenant's object carries the finding and a suppression in one namespace does not cover the other.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext, tenant_of
from dra_constructs.guardrails.manifest import Manifest, RequestView, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE", "shared_use"]

_ALLOW_MULTIPLE = re.compile(r"device\s*\.\s*allowMultipleAllocations")


def _shared_class(ctx: AuditContext, name: str) -> bool:
    """A DeviceClass in the set whose selectors pick devices that allow multiple allocations."""
    device_class = ctx.device_class(name)
    if device_class is None:
        return False
    expressions = (as_dict(as_dict(s).get("cel")).get("expression")
                   for s in as_list(as_dict(device_class.obj.get("spec")).get("selectors")))
    return any(isinstance(e, str) and _ALLOW_MULTIPLE.search(e) for e in expressions)


def shared_use(ctx: AuditContext, request: RequestView) -> str | None:
    """How a request takes a share of a GPU class's devices (for the message), else ``None``."""
    cls = request.device_class_name
    if not cls or not ctx.is_gpu_class(cls):
        return None
    if as_dict(request.fields.get("capacity")).get("requests"):
        return "asks for a share of the device's capacity (capacity.requests)"
    if any(isinstance(e, str) and _ALLOW_MULTIPLE.search(e) for _, e in request.selectors()):
        return "selects devices that allow multiple allocations"
    if _shared_class(ctx, cls):
        return "uses a DeviceClass whose devices allow multiple allocations"
    return None


def _users(ctx: AuditContext) -> dict[tuple[str, str, str], list[Manifest]]:
    """Workloads by the claim they use: ``(kind, namespace, name)`` of the template or claim; one object of
    each shape (its tenant is the shape's: all the caller asks)."""
    users: dict[tuple[str, str, str], list[Manifest]] = defaultdict(list)
    for m in ctx.representatives:
        for _, entry in m.pod_claims():
            source = ctx.claim_source(m, entry)
            if source is not None:
                users[(source.kind, source.namespace, source.name)].append(m)
    return users


def _check(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    shares: dict[str, list[tuple[Manifest, RequestView, str]]] = defaultdict(list)
    for m in ctx.representatives:  # (claims are not memoized: each is one)
        if m.claim_spec is None or not m.namespace:
            continue  # a claim without a namespace lands wherever it is applied: no tenant to compare
        for request in m.requests():
            how = shared_use(ctx, request)
            if how is not None:
                shares[request.device_class_name].append((m, request, how))
    if not shares:
        return
    users = _users(ctx)
    for cls, uses in sorted(shares.items()):
        tenants: set[tuple[str, str]] = set()
        for m, _, _ in uses:
            workloads = users.get((m.kind, m.namespace, m.name), [])
            tenants.update(tenant_of(w) for w in workloads)
            tenants.add((m.namespace, ""))
        namespaces = sorted({ns for ns, _ in tenants})
        labels = sorted({label for _, label in tenants} - {""})
        if len(namespaces) > 1:
            who = f"namespaces {', '.join(namespaces)}"
        elif len(labels) > 1:
            who = f"tenants {', '.join(labels)} of namespace {namespaces[0]}"
        else:
            continue
        for m, request, how in uses:
            yield m, Hit(field_path(request.path, "deviceClassName"),
                         f"request {request.name!r} {how} of DeviceClass {cls!r}, which {who} all draw shares from: "
                         "the scheduler can place their allocations on one physical GPU, with no isolation "
                         "between the tenants and no sanitizer barrier (the device is never free)")


RULE = Rule(
    id="DRA021",
    name="no-cross-tenant-device-shares",
    severity=Severity.ERROR,
    why="shares of one GPU (consumable capacity, allowMultipleAllocations) handed to two tenants put both on the "
        "same device at once: no hardware isolation, and the sanitizer never gets the device back to clean it",
    fix="give each tenant its own DeviceClass whose selector restricts it to that tenant's GPUs (a pool, node "
        "or attribute of its own), or whole devices / MIG slices; sharing within one tenant is DRA006's to allow",
    set_check=_check,
)
