"""Which extended resources are GPUs (shared by DRA001 and the GPU-pod test of other rules)."""

from __future__ import annotations

import re
from typing import Any

from .manifest import as_dict

__all__ = ["is_legacy_gpu_resource", "legacy_gpu_resources"]

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
