"""DRA001: no legacy extended resources for GPUs (``nvidia.com/gpu``, ``nvidia.com/mig-*``, ...)."""

from __future__ import annotations

from collections.abc import Iterator

from ..context import AuditContext
from ..manifest import Manifest, field_path
from ..model import Hit, Rule, Severity
from ..resources import is_legacy_gpu_resource, legacy_gpu_resources

__all__ = ["RULE", "is_legacy_gpu_resource", "legacy_gpu_resources"]

def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    holders = [(path, c, f"container {c.get('name')!r}") for path, c in m.containers()]
    holders += [(path, c, f"the container spec at {path}") for path, c in m.loose_containers()]
    holders += [(pod.path, {"resources": pod.spec.get("resources")}, "the pod") for pod in m.pods]
    for path, container, who in holders:
        for section, name in legacy_gpu_resources(container):
            yield Hit(
                field_path(path, "resources", section, name),
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
        "gpu.nvidia.com or mig.nvidia.com), list it in spec.resourceClaims and reference it from the "
        "container's resources.claims",
    object_check=_check,
)
