"""DRA010: extended resources served by DRA (KEP-5004) take any device of their DeviceClass."""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import LOOSE, POD
from dra_constructs.guardrails.manifest import Manifest, as_dict, as_list
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.rules.extended_resources import gpu_resource_requests
from dra_constructs.guardrails.rules.selectors import selectors_pin_hardware

__all__ = ["RULE"]

_HOW = {
    "declared": "declared with --dra-extended-resource / set_dra_extended_resources",
    "class": "spec.extendedResourceName of that DeviceClass in the manifests",
    "implicit": "the implicit name of that DeviceClass",
}


def _class_pins_hardware(ctx: AuditContext, cls: str) -> bool:
    """Whether the DeviceClass in the set selects one GPU model or MIG profile by itself."""
    device_class = ctx.device_class(cls)
    if device_class is None:
        return False
    expressions = [as_dict(as_dict(s).get("cel")).get("expression")
                   for s in as_list(as_dict(device_class.obj.get("spec")).get("selectors"))]
    return selectors_pin_hardware([e for e in expressions if isinstance(e, str)])


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for path, who, section, name in gpu_resource_requests(m, ctx):
        mapped = ctx.dra_extended_resource(name)
        if mapped is None:
            continue
        cls, how = mapped
        if _class_pins_hardware(ctx, cls):
            continue
        notes = []
        if not ctx.target.dra_extended_resources_on_by_default:
            notes.append(f"on Kubernetes {ctx.target} only with the DRAExtendedResource feature gate (alpha)")
        if how == "declared":
            notes.append("a node where a device plugin registered the same name still serves it by the plugin")
        note = f" ({'; '.join(notes)})" if notes else ""
        yield Hit(
            path,
            f"{who} asks for {name!r} in resources.{section}, which DRA serves from DeviceClass {cls!r} "
            f"({_HOW[how]}){note}: the scheduler allocates any device of that class, with no selector "
            "pinning the GPU model or MIG profile",
        )


RULE = Rule(
    id="DRA010",
    name="unpinned-dra-extended-resource",
    severity=Severity.WARNING,
    why="an extended resource served by DRA gets any device of its DeviceClass: the request cannot say which "
        "GPU model, memory or MIG profile it needs",
    fix="request the device through a ResourceClaimTemplate whose selectors pin the model or MIG profile "
        "(spec.resourceClaims + resources.claims), or map the name with spec.extendedResourceName to a "
        "DeviceClass whose selectors pin it (e.g. profile == '1g.10gb')",
    object_check=_check,
    # facets: reads gpu_resource_requests: its pods' and loose resources
    fires_on=POD | LOOSE,
)
