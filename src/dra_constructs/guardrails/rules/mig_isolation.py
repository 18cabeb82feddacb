"""DRA022: MIG isolation tolerations: an exclusive tenant tolerates only its own GPUs, nobody tolerates another's.

The sanitizer agent taints every MIG device of a GPU that holds a slice with key
``isolation.dra-constructs.io/gpu`` (:mod:`dra_constructs.isolation`): value = the tenant on a GPU
an ``exclusive-gpu`` tenant holds, ``Shared`` on a GPU shared tenants hold, ``Conflict`` where both
already met. A claim is exclusive for the agent when its request tolerates its own namespace's
value, so:

- a claim or template in the namespace of an exclusive-gpu tenant (Namespace label
  ``isolation.dra-constructs.io/mig: exclusive-gpu``) must carry that toleration on every GPU
  request: without it the agent takes it for a shared claim and other tenants join its GPU;
- no request tolerates another namespace's value, ``Conflict``, the key with operator
  ``Exists``, or every taint (no key, ``Exists``); a request of an exclusive tenant does not
  tolerate ``Shared`` either. Admin-access requests are exempt (node agents, never a tenant).
"""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import RESOURCE_API
from dra_constructs.guardrails.manifest import Manifest, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.tenancy import tenancy
from dra_constructs.isolation import ISOLATION_LABEL, ISOLATION_TAINT_KEY, isolation_problem, own_toleration

__all__ = ["RULE", "exclusive_namespace"]


def exclusive_namespace(ctx: AuditContext, namespace: str | None) -> bool:
    """Whether the set declares ``namespace`` an exclusive-gpu tenant (its Namespace's label)."""
    ns = tenancy(ctx).namespaces.get(namespace or "")
    return ns is not None and ns.labels().get(ISOLATION_LABEL) == "exclusive-gpu"


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    if not m.is_resource_api or m.kind not in ("ResourceClaim", "ResourceClaimTemplate"):
        return
    namespace = m.namespace or None
    exclusive = exclusive_namespace(ctx, namespace)
    own = own_toleration(namespace or "")
    for request in m.requests():
        if request.admin_access:
            continue
        tolerations = [as_dict(t) for t in as_list(request.fields.get("tolerations"))]
        for i, toleration in enumerate(tolerations):
            problem = isolation_problem(toleration, namespace, exclusive)
            if problem:
                yield Hit(field_path(request.path, "tolerations", i),
                          f"request {request.name!r} {problem}",
                          fix=f"tolerate {ISOLATION_TAINT_KEY} only with operator Equal and value "
                              f"{namespace!r} (exclusive-gpu) or 'Shared' (shared-gpu)")
        has_own = any(t.get("key") == own["key"] and t.get("operator", "Equal") == "Equal"
                      and t.get("value") == own["value"] for t in tolerations)
        gpu = bool(request.device_class_name) and ctx.is_gpu_class(request.device_class_name)
        if exclusive and (gpu or request.subrequest) and not has_own:
            yield Hit(request.path,
                      f"request {request.name!r} of exclusive-gpu tenant {namespace!r} lacks the toleration of its "
                      "own isolation taint: the sanitizer agent takes it for a shared claim, and other tenants' MIG "
                      "slices may join its GPU",
                      fix=f"add the device toleration {{key: {ISOLATION_TAINT_KEY}, operator: Equal, value: "
                          f"{namespace}}} (GpuTenant.claim_template renders it)")


RULE = Rule(
    id="DRA022",
    name="mig-isolation-tolerations",
    severity=Severity.ERROR,
    why="MIG does not isolate timing channels through memory barriers or NVLink contention; an exclusive-gpu tenant "
        "is kept off other tenants' GPUs only by the sanitizer's isolation taint, which a toleration of another "
        "tenant's value (or of every value) walks through",
    fix=f"tolerate {ISOLATION_TAINT_KEY} only Equal to the claim's own namespace (exclusive-gpu tenants, on every GPU "
        "request) or to Shared (shared-gpu tenants)",
    object_check=_check,
    # facets: returns at once unless is_resource_api
    fires_on=RESOURCE_API,
)
