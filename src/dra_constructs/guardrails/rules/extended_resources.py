"""DRA001: no device-plugin extended resources for GPUs (``nvidia.com/gpu``, ``nvidia.com/mig-*``, ...).

A name the target serves through DRA (KEP-5004: a DeviceClass's ``extendedResourceName``, the
implicit ``deviceclass.resource.kubernetes.io/<class>``, or a mapping the user declared) is not a
device plugin's: DRA010 reports it instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.facets import LOOSE, POD
from dra_constructs.guardrails.manifest import Manifest, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity
from dra_constructs.guardrails.resources import (
    gpu_resources_in,
    implicit_device_class,
    is_legacy_gpu_resource,
    legacy_gpu_resources,
)

__all__ = ["RULE", "gpu_resource_requests", "is_legacy_gpu_resource", "legacy_gpu_resources"]


def _gpu_resource_requests(m: Manifest) -> list[tuple[str, str, str, str]]:
    out: list[tuple[str, str, str, str]] = []
    for path, container in m.containers():
        found = gpu_resources_in(container.get("resources"))
        who = f"container {container.get('name')!r}"
        out.extend((field_path(path, "resources", section, name), who, section, name) for section, name in found)
    for pod in m.pods:
        found = gpu_resources_in(pod.spec.get("resources"))
        out.extend((field_path(pod.path, "resources", section, name), "the pod", section, name)
                   for section, name in found)
    for path, resources, holder in m.loose_resources():
        who = f"the container spec at {holder}" if holder else path
        found = gpu_resources_in(resources)
        out.extend((field_path(path, section, name), who, section, name) for section, name in found)
    return out


def gpu_resource_requests(m: Manifest, ctx: AuditContext | None = None) -> list[tuple[str, str, str, str]]:
    """``(field path, who, requests|limits, name)`` of every GPU extended resource the object asks for.

    Containers and pod-level ``resources`` of every pod spec, plus ``limits``/``requests`` dicts of
    custom kinds outside pod specs (a TrainJob's ``trainer.resourcesPerNode``, a KServe model).
    Several rules ask; with ``ctx`` the answer is computed once per object and audit.
    """
    if ctx is None:
        return _gpu_resource_requests(m)
    found: list[tuple[str, str, str, str]] = ctx.memo("gpu_resource_requests", m, _gpu_resource_requests)
    return found


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    for path, who, section, name in gpu_resource_requests(m, ctx):
        if ctx.dra_extended_resource(name) is not None:
            continue  # DRA010
        if implicit_device_class(name) is not None:
            yield Hit(path, f"{who} asks for {name!r} in resources.{section}: Kubernetes {ctx.target} has no "
                            "extended resources served by DRA (KEP-5004 exists from 1.34), so nothing provides it",
                      fix="request the device through a ResourceClaimTemplate (spec.resourceClaims + "
                          "resources.claims), or target Kubernetes 1.34+")
            continue
        yield Hit(
            path,
            f"{who} asks for the legacy extended resource {name!r} in resources.{section}: "
            "the device plugin hands out whole devices with no selector, no sharing policy "
            "and no sanitization barrier",
        )


RULE = Rule(
    id="DRA001",
    name="no-legacy-gpu-extended-resources",
    severity=Severity.ERROR,
    why="GPUs must come through DRA claims, not device-plugin extended resources such as nvidia.com/gpu",
    fix="remove the GPU entry from resources.requests/limits; add a ResourceClaimTemplate (deviceClassName "
        "gpu.nvidia.com or mig.nvidia.com; gpu.amd.com for amd.com/gpu), list it in spec.resourceClaims and "
        "reference it from the container's resources.claims. If the cluster serves the name through DRA (a "
        "DeviceClass with extendedResourceName, 1.34+), declare it: audit --dra-extended-resource NAME=CLASS, or "
        "set_dra_extended_resources(app, {NAME: CLASS}) at synth",
    object_check=_check,
    # facets: reads gpu_resource_requests: containers and pod resources of its pods, loose resources
    fires_on=POD | LOOSE,
)
