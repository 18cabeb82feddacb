"""DRA014: a claim of a Kueue-managed workload is one Kueue can admit."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.manifest import Manifest, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.tenancy import claim_device_usage, tenancy
from dra_constructs.tenants.kueue import kueue_inadmissible

__all__ = ["RULE"]


def _workload_hits(ctx: AuditContext, m: Manifest, queue: str) -> Iterator[Hit]:
    index = tenancy(ctx)
    where = f"LocalQueue {queue!r}" if queue else f"namespace {m.namespace!r} (it has a LocalQueue)"
    for path, entry in m.pod_claims():
        claim = entry.get("resourceClaimName")
        if isinstance(claim, str):
            yield Hit(field_path(path, "resourceClaimName"),
                      f"workload of {where} uses ResourceClaim {claim!r}: Kueue admits only "
                      "ResourceClaimTemplates, so the workload stays suspended")
            continue
        name = entry.get("resourceClaimTemplateName")
        template = ctx.template(m.namespace, name) if isinstance(name, str) else None
        if template is None or template.claim_spec is None:
            continue
        spec, base = template.claim_spec
        for at, reason in kueue_inadmissible(spec, base, index.kueue_version or "0.18"):
            yield Hit(field_path(path, "resourceClaimTemplateName"),
                      f"workload of {where} uses ResourceClaimTemplate {name!r} ({at}): {reason}; Kueue marks "
                      "such workloads inadmissible")
        if index.kueue_mapped is not None:
            for device_class in sorted(claim_device_usage(template)):
                if device_class not in index.kueue_mapped:
                    yield Hit(field_path(path, "resourceClaimTemplateName"),
                              f"ResourceClaimTemplate {name!r} uses DeviceClass {device_class!r}, which Kueue's "
                              "deviceClassMappings in the set do not map: Kueue marks the workload inadmissible")


def _check(ctx: AuditContext) -> Iterator[tuple[Sequence[Manifest], Hit]]:
    index = tenancy(ctx)
    for m, members in ctx.groups:  # (labels, namespace and claims are the shape's: judged once)
        if not m.pods or not m.namespace:
            continue
        queue = index.queue_of(m)
        if queue is None:
            continue
        hits = list(_workload_hits(ctx, m, queue))
        if not queue and ctx.is_gpu_pod(m) and not ctx.uses_only_admin_claims(m):
            hits.append(Hit("metadata.labels",
                            f"GPU workload in namespace {m.namespace!r}, which has a LocalQueue, names no queue: it "
                            "bypasses Kueue's admission and fair sharing",
                            severity=Severity.WARNING,
                            fix="add the label kueue.x-k8s.io/queue-name: <the tenant's LocalQueue> "
                                "(tenant.queue_labels)"))
        for hit in hits:
            yield members, hit


RULE = Rule(
    id="DRA014",
    name="kueue-admissible-claims",
    severity=Severity.ERROR,
    why="Kueue admits DRA workloads only through ResourceClaimTemplates with exactly/ExactCount requests on "
        "mapped DeviceClasses, without firstAvailable, allocationMode All, constraints, per-claim config or "
        "admin access; anything else stays suspended forever",
    fix="build the claim with kueue_compatible=True (or set_kueue_compatible(app)): one exactly request per "
        "device kind, the device config on the DeviceClass",
    set_check=_check,
)
