"""DRA004: workload requests carry CEL selectors that pin the hardware and pass the CEL checker."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from dra_constructs.catalog import ATTRIBUTE_DOMAIN, GPU_ATTRIBUTES, GPU_CAPACITIES, MIG_ATTRIBUTES, MIG_CAPACITIES
from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import RESOURCE_API
from dra_constructs.guardrails.manifest import Manifest, RequestView, as_dict, as_list, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["RULE", "references", "selectors_pin_hardware"]

_QUOTED = r"""['"]([^'"]+)['"]"""
_NAME = r"""(?:\.\s*([A-Za-z_]\w*)|\[\s*['"]([A-Za-z_]\w*)['"]\s*\])"""
_ATTRIBUTE = re.compile(rf"device\s*\.\s*attributes\s*\[\s*{_QUOTED}\s*\]\s*{_NAME}")
_CAPACITY = re.compile(rf"device\s*\.\s*capacity\s*\[\s*{_QUOTED}\s*\]\s*{_NAME}")
_GUARD_IN = re.compile(rf"{_QUOTED}\s+in\s+device\s*\.\s*attributes\s*\[\s*{_QUOTED}\s*\]")
_GUARD_HAS = re.compile(rf"has\s*\(\s*device\s*\.\s*attributes\s*\[\s*{_QUOTED}\s*\]\s*\.\s*([A-Za-z_]\w*)\s*\)")

_MIG_ONLY_ATTRIBUTES = frozenset(MIG_ATTRIBUTES) - frozenset(GPU_ATTRIBUTES)
_MIG_ONLY_CAPACITIES = frozenset(MIG_CAPACITIES) - frozenset(GPU_CAPACITIES)
#: Attributes that identify a GPU model (memory comes from the capacity) or one exact device.
_MODEL_ATTRIBUTES = frozenset({"productName", "architecture", "cudaComputeCapability"})
_EXACT_ATTRIBUTES = frozenset({"productName", "uuid"})


@lru_cache(maxsize=4096)
def references(expression: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """``(attributes, capacities, guarded attributes)`` of the NVIDIA domain an expression reads.

    A textual scan (the CEL checker owns parsing); it only decides whether a selector pins the
    hardware and whether it reads attributes the device class does not publish. Cached: the
    same selectors recur in every object a construct or a template generates.
    """
    attributes = {m.group(2) or m.group(3) for m in _ATTRIBUTE.finditer(expression) if m.group(1) == ATTRIBUTE_DOMAIN}
    capacities = {m.group(2) or m.group(3) for m in _CAPACITY.finditer(expression) if m.group(1) == ATTRIBUTE_DOMAIN}
    guarded = {m.group(1) for m in _GUARD_IN.finditer(expression) if m.group(2) == ATTRIBUTE_DOMAIN}
    guarded |= {m.group(2) for m in _GUARD_HAS.finditer(expression) if m.group(1) == ATTRIBUTE_DOMAIN}
    return frozenset(attributes), frozenset(capacities), frozenset(guarded)


def _cel_hits(ctx: AuditContext, path: str, expression: object, label: str) -> Iterator[Hit]:
    if not isinstance(expression, str) or not expression.strip():
        yield Hit(path, f"{label} has a selector without a CEL expression",
                  fix="write selectors as {cel: {expression: \"...\"}} with a non-empty expression")
        return
    verdict = ctx.check_cel(expression)
    if verdict.verdict != "OK":
        yield Hit(path, f"{label}: the API server of Kubernetes {ctx.target} refuses this selector "
                        f"({verdict.verdict}): {verdict.error or 'no detail'}",
                  fix=verdict.fix or "rewrite the selector so that it compiles in the DRA CEL environment")


def _attribute_hits(request: RequestView, path: str, expression: str, label: str) -> Iterator[Hit]:
    cls = request.device_class_name
    if cls not in ("gpu.nvidia.com", "mig.nvidia.com"):
        return
    attributes, capacities, guarded = references(expression)
    known_attributes = GPU_ATTRIBUTES if cls == "gpu.nvidia.com" else MIG_ATTRIBUTES
    known_capacities = GPU_CAPACITIES if cls == "gpu.nvidia.com" else MIG_CAPACITIES
    for name in sorted(attributes - guarded - set(known_attributes)):
        if cls == "gpu.nvidia.com" and name in _MIG_ONLY_ATTRIBUTES:
            yield Hit(path, f"{label} reads the MIG attribute {name!r} under deviceClassName gpu.nvidia.com: "
                            "whole GPUs do not publish it, so the scheduler stops with a CEL runtime error",
                      fix="select MIG slices with deviceClassName: mig.nvidia.com")
        else:
            yield Hit(path, f"{label} reads attribute {name!r}, which current NVIDIA drivers do not publish "
                            "for this class (a CEL runtime error blocks scheduling)",
                      severity=Severity.WARNING,
                      fix=f"guard it with '{name}' in device.attributes['gpu.nvidia.com'] or drop it")
    for name in sorted(capacities - set(known_capacities)):
        slice_capacity = name.startswith("memorySlice")
        if cls == "mig.nvidia.com" and slice_capacity:
            continue
        if cls == "gpu.nvidia.com" and (name in _MIG_ONLY_CAPACITIES or slice_capacity):
            yield Hit(path, f"{label} reads the MIG capacity {name!r} under deviceClassName gpu.nvidia.com",
                      fix="select MIG slices with deviceClassName: mig.nvidia.com")
        else:
            yield Hit(path, f"{label} reads capacity {name!r}, which NVIDIA devices of this class do not publish",
                      severity=Severity.WARNING, fix="use device.capacity['gpu.nvidia.com'].memory")


def _pinned(cls: str, attributes: set[str], capacities: set[str]) -> bool:
    if cls == "mig.nvidia.com":
        return "profile" in attributes or "memory" in capacities
    return bool(attributes & _EXACT_ATTRIBUTES) or ("memory" in capacities and bool(attributes & _MODEL_ATTRIBUTES))


def selectors_pin_hardware(expressions: list[str]) -> bool:
    """Whether NVIDIA selectors pin one MIG profile or one GPU model (as :func:`_pinned` judges it)."""
    attributes: set[str] = set()
    capacities: set[str] = set()
    for expression in expressions:
        found = references(expression)
        attributes |= found[0]
        capacities |= found[1]
    return "profile" in attributes or _pinned("gpu.nvidia.com", attributes, capacities)


def _class_selectors(ctx: AuditContext, cls: str) -> list[str]:
    device_class = ctx.device_class(cls)
    if device_class is None:
        return []
    out = []
    for selector in as_list(as_dict(device_class.obj.get("spec")).get("selectors")):
        expression = as_dict(as_dict(selector).get("cel")).get("expression")
        if isinstance(expression, str):
            out.append(expression)
    return out


def _request_hits(ctx: AuditContext, request: RequestView) -> Iterator[Hit]:
    label = f"request {request.name!r}"
    expressions: list[str] = []
    for path, expression in request.selectors():
        yield from _cel_hits(ctx, path, expression, label)
        if isinstance(expression, str):
            expressions.append(expression)
            if not request.admin_access:
                yield from _attribute_hits(request, path, expression, label)
    cls = request.device_class_name
    if request.admin_access or cls not in ("gpu.nvidia.com", "mig.nvidia.com"):
        return  # node agents watch every device; other classes may pin in their DeviceClass
    attributes: set[str] = set()
    capacities: set[str] = set()
    for expression in expressions + _class_selectors(ctx, cls):
        found = references(expression)
        attributes |= found[0]
        capacities |= found[1]
    if not _pinned(cls, attributes, capacities):
        what = ("a MIG profile (or slice memory)" if cls == "mig.nvidia.com"
                else "the GPU model (productName, or architecture/compute capability plus memory)")
        yield Hit(
            field_path(request.path, "selectors") if expressions else request.path,
            f"{label} takes any device of class {cls}: its selectors do not pin {what}",
            severity=Severity.WARNING,
        )


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for request in m.requests():
        yield from _request_hits(ctx, request)
    if m.is_resource_api and m.kind == "DeviceClass":
        for i, selector in enumerate(as_list(as_dict(m.obj.get("spec")).get("selectors"))):
            expression = as_dict(as_dict(selector).get("cel")).get("expression")
            yield from _cel_hits(ctx, field_path("spec.selectors", i, "cel", "expression"), expression,
                                 f"DeviceClass {m.name!r}")


RULE = Rule(
    id="DRA004",
    name="pinned-valid-selectors",
    severity=Severity.ERROR,
    why="requests must say which hardware they need (MIG profile, or GPU model and memory) in CEL the "
        "API server of the target version accepts",
    fix="add selectors such as device.attributes['gpu.nvidia.com'].profile == '3g.40gb' (mig.nvidia.com) "
        "or ...architecture == 'Hopper' && device.capacity['gpu.nvidia.com'].memory"
        ".compareTo(quantity('79Gi')) >= 0 (gpu.nvidia.com)",
    object_check=_check,
    # facets: reads requests() and a DeviceClass's selectors, both only if is_resource_api
    fires_on=RESOURCE_API,
)
