"""DRA009: several tenant namespaces with GPU workloads need the sanitizer DaemonSet."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from dra_constructs.guardrails.amd import uses_amd_devices
from dra_constructs.guardrails.context import SANITIZER_AMD_LABEL, SANITIZER_LABEL, AuditContext, Group
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE"]

_SYSTEM_NAMESPACE_PREFIXES = ("kube-",)
#: Namespaces the message names (the rest is counted).
_NAMED = 10


def _tenant_workloads(ctx: AuditContext, groups: Sequence[Group]) -> dict[str, list[Group]]:
    """GPU workloads by explicit namespace, as groups of one shape (judged by their first object: the
    namespace, pod specs and claims are the shape's); node agents (adminAccess only) are not tenants."""
    by_namespace: dict[str, list[Group]] = {}
    for group in groups:
        m = group[0]
        if not m.pods or not m.namespace or m.namespace.startswith(_SYSTEM_NAMESPACE_PREFIXES):
            continue
        if not ctx.is_gpu_pod(m) or ctx.uses_only_admin_claims(m):
            continue
        by_namespace.setdefault(m.namespace, []).append(group)
    return by_namespace


def _manifest_sets(ctx: AuditContext) -> list[tuple[str, Sequence[Group]]]:
    """The sets DRA009 judges: the whole input, or each file on its own (``tenant_scope="file"``; the
    objects of a group share their file)."""
    if ctx.tenant_scope != "file":
        return [("set", ctx.groups)]
    by_file: dict[str | None, list[Group]] = {}
    for group in ctx.groups:
        by_file.setdefault(group[0].file, []).append(group)
    return [(f"file:{file}", groups) for file, groups in by_file.items()]


def _names(namespaces: list[str]) -> str:
    shown = ", ".join(namespaces[:_NAMED])
    return shown + (f" and {len(namespaces) - _NAMED} more" if len(namespaces) > _NAMED else "")


def _amd_unsanitized(ctx: AuditContext) -> Iterator[tuple[Sequence[Manifest], Hit]]:
    """With only an NVIDIA sanitizer: AMD GPUs pass between tenants unsanitized (no DaemonSet runs the AMD backend)."""
    if ctx.amd_sanitizer_present:
        return
    key, value = SANITIZER_AMD_LABEL
    for group, manifests in _manifest_sets(ctx):
        workloads_by_ns = _tenant_workloads(ctx, manifests).items()
        tenants = {ns: amd for ns, gs in workloads_by_ns if (amd := [g for g in gs if uses_amd_devices(ctx, g[0])])}
        if len(tenants) < 2:
            continue
        message = (f"AMD GPU workloads of {len(tenants)} tenant namespaces ({_names(sorted(tenants))}) share the "
                   "cluster's AMD GPUs, but no sanitizer DaemonSet in the set runs the AMD backend (pod label "
                   f"{key}: {value}, from SanitizerDaemonSet(vendor='amd'); docs/amd.md), so device memory and "
                   "LDS pass from one tenant to the next without drain, cleaner shader, zero-fill and verification")
        hit = Hit("metadata.namespace", message, group=group)
        for _, workloads in sorted(tenants.items()):
            for _, members in workloads:
                yield members, hit


def _check_set(ctx: AuditContext) -> Iterator[tuple[Sequence[Manifest], Hit]]:
    """One hit per tenant workload (given a shape's objects at a time), grouped: the engine reports one finding
    per manifest set."""
    if ctx.sanitizer_present:
        yield from _amd_unsanitized(ctx)
        return
    key, value = SANITIZER_LABEL
    for group, manifests in _manifest_sets(ctx):
        tenants = _tenant_workloads(ctx, manifests)
        if len(tenants) < 2:
            continue
        missing = f"the manifest set has no sanitizer DaemonSet (label {key}: {value})"
        if ctx.sanitizers_not_counted:
            ds, why = ctx.sanitizers_not_counted[0]
            missing = (f"the sanitizer DaemonSet {ds.namespace}/{ds.name} does not cover every GPU node: {why} "
                       "(re-synthesize it with this dra-constructs: the agent needs no claim)")
        message = (f"GPU workloads of {len(tenants)} tenant namespaces ({_names(sorted(tenants))}) share the "
                   f"cluster's GPUs, but {missing}: device memory passes from one tenant to the next without "
                   "drain, zero-fill and verification")
        hit = Hit("metadata.namespace", message, group=group)
        for _, workloads in sorted(tenants.items()):
            for _, members in workloads:
                yield members, hit


RULE = Rule(
    id="DRA009",
    name="tenant-barrier",
    severity=Severity.ERROR,
    why="when GPUs move between tenants, only the sanitizer's drain / zero-fill / verify barrier keeps one "
        "tenant's data from the next",
    fix="deploy dra-constructs' SanitizerDaemonSet in the same manifest set (its DaemonSet carries the label "
        "dra-constructs.io/component: sanitizer; for AMD GPUs SanitizerDaemonSet(vendor='amd')), or suppress DRA009 "
        "with a reason where it runs elsewhere",
    set_check=_check_set,
)
