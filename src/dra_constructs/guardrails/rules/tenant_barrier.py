"""DRA009: several tenant namespaces with GPU workloads need the sanitizer DaemonSet."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.amd import uses_amd_devices
from dra_constructs.guardrails.context import SANITIZER_AMD_LABEL, SANITIZER_LABEL, AuditContext
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE"]

_SYSTEM_NAMESPACE_PREFIXES = ("kube-",)
#: Namespaces the message names (the rest is counted).
_NAMED = 10


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


def _manifest_sets(ctx: AuditContext) -> list[tuple[str, list[Manifest]]]:
    """The sets DRA009 judges: the whole input, or each file on its own (``tenant_scope="file"``)."""
    if ctx.tenant_scope != "file":
        return [("set", list(ctx.manifests))]
    by_file: dict[str | None, list[Manifest]] = {}
    for m in ctx.manifests:
        by_file.setdefault(m.file, []).append(m)
    return [(f"file:{file}", manifests) for file, manifests in by_file.items()]


def _names(namespaces: list[str]) -> str:
    shown = ", ".join(namespaces[:_NAMED])
    return shown + (f" and {len(namespaces) - _NAMED} more" if len(namespaces) > _NAMED else "")


def _amd_unsanitized(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    """With only an NVIDIA sanitizer: AMD GPUs pass between tenants unsanitized (no DaemonSet runs the AMD backend)."""
    if ctx.amd_sanitizer_present:
        return
    key, value = SANITIZER_AMD_LABEL
    for group, manifests in _manifest_sets(ctx):
        workloads_by_ns = _tenant_workloads(ctx, manifests).items()
        tenants = {ns: amd for ns, ms in workloads_by_ns if (amd := [m for m in ms if uses_amd_devices(ctx, m)])}
        if len(tenants) < 2:
            continue
        message = (f"AMD GPU workloads of {len(tenants)} tenant namespaces ({_names(sorted(tenants))}) share the "
                   "cluster's AMD GPUs, but no sanitizer DaemonSet in the set runs the AMD backend (pod label "
                   f"{key}: {value}, from SanitizerDaemonSet(vendor='amd'); docs/amd.md), so device memory and "
                   "LDS pass from one tenant to the next without drain, cleaner shader, zero-fill and verification")
        for _, workloads in sorted(tenants.items()):
            for m in workloads:
                yield m, Hit("metadata.namespace", message, group=group)


def _check_set(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    """One hit per tenant workload, grouped: the engine reports one finding per manifest set."""
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
        for _, workloads in sorted(tenants.items()):
            for m in workloads:
                yield m, Hit("metadata.namespace", message, group=group)


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
