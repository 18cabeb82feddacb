"""DRA009: several tenant namespaces with GPU workloads need the sanitizer DaemonSet."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.amd import uses_amd_devices
from dra_constructs.guardrails.context import SANITIZER_LABEL, AuditContext
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE"]

_SYSTEM_NAMESPACE_PREFIXES = ("kube-",)


def _tenant_workloads(ctx: AuditContext, manifests: list[Manifest]) -> dict[str, list[Manifest]]:
    """GPU workloads by explicit namespace; node agents (adminAccess only) are not tenants."""
    by_namespace: dict[str, list[Manifest]] = {}
    for m in manifests:
        if not m.pods or not m.namespace or m.namespace.startswith(_SYSTEM_NAMESPACE_PREFIXES):
            continue
        if not ctx.is_gpu_pod(m) or ctx.uses_only_admin_claims(m):
            continue
        by_namespace.setdefault(m.namespace, []).append(m)
    return by_namespace


def _manifest_sets(ctx: AuditContext) -> list[list[Manifest]]:
    """The sets DRA009 judges: the whole input, or each file on its own (``tenant_scope="file"``)."""
    if ctx.tenant_scope != "file":
        return [list(ctx.manifests)]
    by_file: dict[str | None, list[Manifest]] = {}
    for m in ctx.manifests:
        by_file.setdefault(m.file, []).append(m)
    return list(by_file.values())


def _amd_unsanitized(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    """With a sanitizer: AMD GPUs still pass between tenants unsanitized (the agent has no AMD backend yet)."""
    for manifests in _manifest_sets(ctx):
        workloads_by_ns = _tenant_workloads(ctx, manifests).items()
        tenants = {ns: amd for ns, ms in workloads_by_ns if (amd := [m for m in ms if uses_amd_devices(ctx, m)])}
        if len(tenants) < 2:
            continue
        names = ", ".join(sorted(tenants))
        for namespace, workloads in sorted(tenants.items()):
            for m in workloads:
                yield m, Hit(
                    "metadata.namespace",
                    f"AMD GPU workloads of {len(tenants)} tenant namespaces ({names}) share the cluster's AMD GPUs; "
                    "the sanitizer DaemonSet does not sanitize AMD devices yet (no AMD backend: docs/amd.md), so "
                    f"device memory and LDS pass from {namespace!r} to the next tenant without drain, zero-fill "
                    "and verification",
                )


def _check_set(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    if ctx.sanitizer_present:
        yield from _amd_unsanitized(ctx)
        return
    key, value = SANITIZER_LABEL
    for manifests in _manifest_sets(ctx):
        tenants = _tenant_workloads(ctx, manifests)
        if len(tenants) < 2:
            continue
        names = ", ".join(sorted(tenants))
        missing = f"the manifest set has no sanitizer DaemonSet (label {key}: {value})"
        if ctx.sanitizers_not_counted:
            ds, why = ctx.sanitizers_not_counted[0]
            missing = (f"the sanitizer DaemonSet {ds.namespace}/{ds.name} does not cover every GPU node: {why} "
                       "(re-synthesize it with this dra-constructs: the agent needs no claim)")
        for namespace, workloads in sorted(tenants.items()):
            for m in workloads:
                yield m, Hit(
                    "metadata.namespace",
                    f"GPU workloads of {len(tenants)} tenant namespaces ({names}) share the cluster's GPUs, but "
                    f"{missing}: device memory passes from {namespace!r} to the next tenant without drain, "
                    "zero-fill and verification",
                )


RULE = Rule(
    id="DRA009",
    name="tenant-barrier",
    severity=Severity.ERROR,
    why="when GPUs move between tenants, only the sanitizer's drain / zero-fill / verify barrier keeps one "
        "tenant's data from the next",
    fix="deploy dra-constructs' SanitizerDaemonSet in the same manifest set (its DaemonSet carries the label "
        "dra-constructs.io/component: sanitizer), or suppress DRA009 with a reason where it runs elsewhere",
    set_check=_check_set,
)
