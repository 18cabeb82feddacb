"""DRA012: a namespace's claims, counted over the whole manifest set, fit its ResourceQuota on devices."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.manifest import Manifest, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.tenancy import Contribution, QuotaLimit, claim_device_usage, tenancy
from dra_constructs.tenants.quota import PER_CLASS_SUFFIX

__all__ = ["RULE"]


#: Contributions listed in a finding's ``details`` (the rest are counted).
_MAX_DETAILS = 20


def _details(contributions: list[Contribution], resources: list[str]) -> tuple[str, ...]:
    """Who contributes what (largest first), and the other quota keys the same devices count against."""
    ordered = sorted(contributions, key=lambda c: -c.amount)
    lines = [f"{c.manifest.kind}/{c.manifest.name} {c.path}: {c.detail}" for c in ordered[:_MAX_DETAILS]]
    if len(ordered) > _MAX_DETAILS:
        lines.append(f"... and {len(ordered) - _MAX_DETAILS} more")
    lines += [f"also over: {resource}" for resource in resources[1:]]
    return tuple(lines)


def _over_quota(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    """One finding per violation: the same claims over one quota's limit under several keys (a class's
    ``devices`` and its ``requests.`` extended-resource names) are one violation, reported on the largest
    contributor, with every contribution in ``details``."""
    index = tenancy(ctx)
    for namespace, limits in sorted(index.quotas.items()):
        usage = index.usage.get(namespace)
        if usage is None:
            continue
        over: dict[tuple[object, ...], list[QuotaLimit]] = {}
        surges: dict[tuple[object, ...], tuple[Manifest, QuotaLimit, int, int]] = {}
        for limit in sorted(limits, key=lambda q: (q.quota.name, q.resource)):
            steady = usage.steady.get(limit.resource, 0)
            peak = usage.peak.get(limit.resource, 0)
            contributions = usage.contributions.get(limit.resource, [])
            who = tuple((id(c.manifest), c.path, c.amount) for c in contributions)
            if steady > limit.hard:
                over.setdefault((id(limit.quota), limit.hard, steady, who), []).append(limit)
            elif peak > limit.hard:
                for c in contributions:
                    if c.manifest.kind == "Deployment":
                        surges.setdefault((id(c.manifest), id(limit.quota), limit.hard, steady, peak),
                                          (c.manifest, limit, steady, peak))
        for group in over.values():
            limit = group[0]
            resource = limit.resource
            steady = usage.steady[resource]
            contributions = usage.contributions[resource]
            top = max(contributions, key=lambda c: c.amount)
            others = f" ({len(contributions)} objects contribute: details)" if len(contributions) > 1 else ""
            yield top.manifest, Hit(
                top.path,
                f"namespace {namespace!r} needs {steady} of {resource}, ResourceQuota {limit.quota.name!r} allows "
                f"{limit.hard}{others}: pods beyond the quota never start",
                fix=("this kind of device is closed to the namespace: claim the tenant's own DeviceClasses "
                     "(tenant.claim_template(...)) or add the kind to GpuTenant(quotas=...)")
                if limit.hard == 0 else
                "lower replicas or counts to fit the quota, or raise the tenant's quota "
                "(GpuTenant(quotas=...)) if the tenant is entitled to more",
                details=_details(contributions, [q.resource for q in group]),
            )
        for manifest, limit, steady, peak in surges.values():
            yield manifest, Hit(
                "spec.strategy",
                f"namespace {namespace!r} fits ResourceQuota {limit.quota.name!r} ({steady} of {limit.hard} "
                f"{limit.resource}), but a rolling update runs {peak}: the surge pods' claims are refused",
                severity=Severity.WARNING,
                fix="use strategy Recreate, or rollingUpdate maxSurge: 0 with maxUnavailable >= 1",
            )


def _unquoted_classes(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    """In a GpuTenant namespace, a claim on a class its quota does not cap escapes the quota."""
    index = tenancy(ctx)
    for m in ctx.representatives:  # (claims are not memoized: each is one)
        if not m.is_resource_api or m.kind not in ("ResourceClaim", "ResourceClaimTemplate"):
            continue
        if not index.is_declared_tenant(m.namespace):
            continue
        capped = {q.resource for q in index.quotas.get(m.namespace, ())}
        for device_class in sorted(claim_device_usage(m)):
            if device_class + PER_CLASS_SUFFIX not in capped:
                yield m, Hit(
                    field_path(m.claim_spec[1] if m.claim_spec else "spec", "devices", "requests"),
                    f"tenant namespace {m.namespace!r} has no ResourceQuota on DeviceClass {device_class!r}: "
                    "its devices are not limited for this tenant (the tenant's admission policy refuses them)",
                    fix="use one of the tenant's DeviceClasses (tenant.claim_template(...)), or add the kind of "
                        "device to GpuTenant(quotas=...)",
                )


def _check(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    yield from _over_quota(ctx)
    yield from _unquoted_classes(ctx)


RULE = Rule(
    id="DRA012",
    name="tenant-device-quota",
    severity=Severity.ERROR,
    why="ResourceQuota counts DRA devices per DeviceClass; claims beyond it are refused at admission, so "
        "workloads that need more than their namespace's quota never all run",
    fix="fit replicas x devices per pod to the quota, or raise the tenant's quota",
    set_check=_check,
)
