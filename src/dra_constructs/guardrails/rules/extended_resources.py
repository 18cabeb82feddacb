"""DRA001: no legacy extended resources for GPUs (``nvidia.com/gpu``, ``nvidia.com/mig-*``, ...)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from ..context import AuditContext
from ..manifest import Manifest, as_dict, field_path
from ..model import Hit, Rule, Severity

__all__ = ["RULE", "is_legacy_gpu_resource", "legacy_gpu_resources"]

# GPU-ish extended resource names of the device plugins and GPU-sharing schedulers:
# nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.5gb, nvidia.com/gpumem (HAMi),
# amd.com/gpu, gpu.intel.com/i915, volcano.sh/vgpu-number, aliyun.com/gpu-mem, and KubeVirt
# passthrough names such as nvidia.com/GA100_A100_PCIE_40GB. NVIDIA's network resources
# (nvidia.com/rdma_shared_device_a, nvidia.com/hostdev) are not GPUs and are left alone.
_GPU_NAME = re.compile(r"gpu", re.IGNORECASE)
_NVIDIA_GPU = re.compile(r"^(mig-|(GA|GH|GB|GV|GK|GM|GP|TU|AD)\d{2,3})", re.IGNORECASE)


def is_legacy_gpu_resource(name: str) -> bool:
    """Whether a resource name in requests/limits is a device-plugin GPU resource."""
    domain, slash, local = name.partition("/")
    if not slash:
        return False  # cpu, memory, ephemeral-storage, hugepages-*: no domain
    if _GPU_NAME.search(name):
        return True
    return domain == "nvidia.com" and bool(_NVIDIA_GPU.match(local))


def legacy_gpu_resources(container: dict[str, Any]) -> list[tuple[str, str]]:
    """``(requests|limits, resource name)`` pairs of GPU extended resources in a container."""
    resources = as_dict(container.get("resources"))
    return [
        (section, name)
        for section in ("requests", "limits")
        for name in as_dict(resources.get(section))
        if isinstance(name, str) and is_legacy_gpu_resource(name)
    ]


def _check(m: Manifest, ctx: AuditContext) -> Iterator[Hit]:
    if m.pod_spec is None:
        return
    spec_resources = {"resources": m.pod_spec.get("resources")}
    holders = [*m.containers(), (m.pod_spec_path, spec_resources)]
    for path, container in holders:
        for section, name in legacy_gpu_resources(container):
            who = f"container {container.get('name')!r}" if "name" in container else "the pod"
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
