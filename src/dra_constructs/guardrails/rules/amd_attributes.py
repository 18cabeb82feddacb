"""DRA018: claims for AMD GPUs use only what the AMD GPU DRA driver publishes, and pin the hardware.

The driver (``dra_constructs.catalog.amd``, ROCm/k8s-gpu-dra-driver ``deviceinfo.go``) puts whole
GPUs and partitions in one DeviceClass ``gpu.amd.com``: whole GPUs carry ``deviceID``/``pciAddr``,
partitions ``parentDeviceID``/``parentPciAddr``, and no device carries a NUMA attribute. A
``matchAttribute`` over an attribute the chosen devices lack fits no node (the driver's own
``example-partitions-same-parent.yaml`` matches partitions on ``gpu.amd.com/deviceID``: it never
schedules); a selector reading an attribute no device has is a CEL run-time error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dra_constructs.catalog.amd_driver import (
    AMD_DRIVER,
    AMD_GPU_ATTRIBUTES,
    AMD_PARTITION_ATTRIBUTES,
    AMD_TYPE_GPU,
    AMD_TYPE_PARTITION,
)
from dra_constructs.guardrails.amd import is_amd_class
from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import RESOURCE_API
from dra_constructs.guardrails.manifest import Manifest, RequestView, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE"]

_QUOTED = r"""['"]([^'"]+)['"]"""
_NAME = r"""(?:\.\s*([A-Za-z_]\w*)|\[\s*['"]([A-Za-z_]\w*)['"]\s*\])"""
_ATTRIBUTE = re.compile(rf"device\s*\.\s*attributes\s*\[\s*{_QUOTED}\s*\]\s*{_NAME}")
_GUARD_IN = re.compile(rf"{_QUOTED}\s+in\s+device\s*\.\s*attributes\s*\[\s*{_QUOTED}\s*\]")
_TYPE_IS = re.compile(rf"""\.\s*type\s*==\s*{_QUOTED}""")

_PUBLISHED = frozenset(AMD_GPU_ATTRIBUTES) | frozenset(AMD_PARTITION_ATTRIBUTES)
_GPU_ONLY = frozenset(AMD_GPU_ATTRIBUTES) - frozenset(AMD_PARTITION_ATTRIBUTES)
_PARTITION_ONLY = frozenset(AMD_PARTITION_ATTRIBUTES) - frozenset(AMD_GPU_ATTRIBUTES)
_RENAMED = {"deviceID": "parentDeviceID", "pciAddr": "parentPciAddr"}
_NO_NUMA = frozenset({"resource.kubernetes.io/numaNode", f"{AMD_DRIVER}/numaNode"})


def _expressions(request: RequestView) -> list[tuple[str, str]]:
    return [(p, e) for p, e in request.selectors() if isinstance(e, str)]


def _reads(expression: str) -> tuple[set[str], set[str]]:
    """(AMD attributes read, AMD attributes guarded with ``'x' in device.attributes[...]``)."""
    read = {m.group(2) or m.group(3) for m in _ATTRIBUTE.finditer(expression) if m.group(1) == AMD_DRIVER}
    guarded = {m.group(1) for m in _GUARD_IN.finditer(expression) if m.group(2) == AMD_DRIVER}
    return read, guarded


def _device_type(request: RequestView) -> str | None:
    """``amdgpu`` / ``amdgpu-partition`` when a selector pins ``type``, else None (either)."""
    for _, expression in _expressions(request):
        if f"['{AMD_DRIVER}']" in expression or f'["{AMD_DRIVER}"]' in expression:
            for match in _TYPE_IS.finditer(expression):
                if match.group(1) in (AMD_TYPE_GPU, AMD_TYPE_PARTITION):
                    return match.group(1)
    return None


def _selector_hits(request: RequestView) -> Iterator[Hit]:
    label = f"request {request.name!r}"
    kind = _device_type(request)
    read_all: set[str] = set()
    for path, expression in _expressions(request):
        read, guarded = _reads(expression)
        read_all |= read
        for name in sorted(read - guarded - _PUBLISHED):
            yield Hit(path, f"{label} reads {AMD_DRIVER} attribute {name!r}, which the AMD GPU DRA driver does not "
                            "publish (a CEL run-time error blocks scheduling)",
                      fix=f"use one of {', '.join(sorted(_PUBLISHED))}")
        wrong = _GPU_ONLY if kind == AMD_TYPE_PARTITION else _PARTITION_ONLY if kind == AMD_TYPE_GPU else set()
        for name in sorted((read - guarded) & wrong):
            yield Hit(path, f"{label} selects type {kind!r} but reads {name!r}, which those devices do not publish",
                      fix=f"partitions carry {', '.join(sorted(_PARTITION_ONLY))}; whole GPUs "
                          f"{', '.join(sorted(_GPU_ONLY))}")
    if request.admin_access:
        return
    if kind is None or "productName" not in read_all:
        yield Hit(field_path(request.path, "selectors") if read_all else request.path,
                  f"{label} takes any device of class {request.device_class_name}: whole GPUs and partitions of "
                  "every AMD model share it, and its selectors do not pin type and productName",
                  severity=Severity.WARNING,
                  fix=f"pin device.attributes['{AMD_DRIVER}'].type ('{AMD_TYPE_GPU}' or '{AMD_TYPE_PARTITION}'), "
                      "productName and, for partitions, partitionProfile (GpuClaimTemplate.amd_partition does)")


def _constraint_hits(m: Manifest, ctx: AuditContext, amd: dict[str, RequestView]) -> Iterator[Hit]:
    if m.claim_spec is None:
        return
    spec, base = m.claim_spec
    for i, raw in enumerate(as_list(as_dict(spec.get("devices")).get("constraints"))):
        constraint = as_dict(raw)
        key = "matchAttribute" if "matchAttribute" in constraint else "distinctAttribute"
        attribute = constraint.get(key)
        if not isinstance(attribute, str):
            continue
        names = [str(n).partition("/")[0] for n in as_list(constraint.get("requests"))] or list(amd)
        covered = [amd[n] for n in names if n in amd]
        if not covered:
            continue
        path = field_path(base, "devices", "constraints", i, key)
        if attribute in _NO_NUMA:
            yield Hit(path, f"{key} {attribute} over AMD requests {names}: the AMD GPU DRA driver publishes no NUMA "
                            "attribute, so no device qualifies and the claim fits no node",
                      fix="align AMD devices on resource.kubernetes.io/pcieRoot, partitions of one GPU on "
                          f"{AMD_DRIVER}/parentDeviceID")
            continue
        domain, _, local = attribute.partition("/")
        if domain != AMD_DRIVER:
            continue
        kinds = {_device_type(r) for r in covered}
        if AMD_TYPE_PARTITION in kinds and local in _RENAMED:
            yield Hit(path, f"{key} {attribute} over partition requests {names}: partitions publish "
                            f"{_RENAMED[local]!r}, not {local!r} (deviceinfo.go; the driver's docs say otherwise), "
                            "so no partition qualifies and the claim fits no node",
                      fix=f"write {key}: {AMD_DRIVER}/{_RENAMED[local]} (Alignment(on='parentGPU'))")
        elif AMD_TYPE_GPU in kinds and local in _PARTITION_ONLY:
            yield Hit(path, f"{key} {attribute} over whole-GPU requests {names}: whole GPUs do not publish {local!r}",
                      fix=f"whole GPUs carry {', '.join(sorted(_GPU_ONLY))}")
        elif local not in _PUBLISHED:
            yield Hit(path, f"{key} {attribute}: the AMD GPU DRA driver publishes no such attribute",
                      fix=f"use one of {', '.join(sorted(_PUBLISHED))}")


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    amd = {r.name.partition("/")[0]: r for r in m.requests() if is_amd_class(ctx, r.device_class_name)}
    if not amd:
        return
    for request in m.requests():
        if is_amd_class(ctx, request.device_class_name):
            yield from _selector_hits(request)
    yield from _constraint_hits(m, ctx, amd)


RULE = Rule(
    id="DRA018",
    name="amd-published-attributes",
    severity=Severity.ERROR,
    why="the AMD GPU DRA driver's one class holds whole GPUs and partitions with different attributes; a "
        "constraint or selector on an attribute the devices lack never schedules",
    fix="pin type, productName and partitionProfile; align partitions of one GPU on gpu.amd.com/parentDeviceID "
        "and AMD devices on resource.kubernetes.io/pcieRoot (docs/amd.md)",
    object_check=_check,
    # facets: reads requests() and claim_spec: empty unless is_resource_api
    fires_on=RESOURCE_API,
)
