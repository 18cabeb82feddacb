"""Which extended resources are GPUs, and which of them DRA serves (shared by DRA001, DRA010 and others)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.manifest import as_dict
from dra_constructs.target import Target

__all__ = [
    "IMPLICIT_EXTENDED_RESOURCE_PREFIX",
    "gpu_resources_in",
    "implicit_device_class",
    "is_legacy_gpu_resource",
    "legacy_gpu_resources",
    "parse_dra_extended_resources",
]

# GPU-ish extended resource names of the device plugins and GPU-sharing schedulers:
# nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.5gb, nvidia.com/gpumem (HAMi),
# amd.com/gpu, gpu.intel.com/i915, volcano.sh/vgpu-number, aliyun.com/gpu-mem, and KubeVirt
# passthrough names such as nvidia.com/GA100_A100_PCIE_40GB. NVIDIA's network resources
# (nvidia.com/rdma_shared_device_a, nvidia.com/hostdev) are not GPUs and are left alone.
_GPU_NAME = re.compile(r"gpu", re.IGNORECASE)
_NVIDIA_GPU = re.compile(r"^(mig-|(GA|GH|GB|GV|GK|GM|GP|TU|AD)\d{2,3})", re.IGNORECASE)

#: KEP-5004: every DeviceClass ``<class>`` is also requestable as ``deviceclass.resource.kubernetes.io/<class>``.
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_EXTENDED_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def is_legacy_gpu_resource(name: str) -> bool:
    """Whether a resource name in requests/limits is a GPU extended resource (device plugin or DRA-mapped)."""
    domain, slash, local = name.partition("/")
    if not slash:
        return False  # cpu, memory, ephemeral-storage, hugepages-*: no domain
    if _GPU_NAME.search(name):
        return True
    return domain == "nvidia.com" and bool(_NVIDIA_GPU.match(local))


def gpu_resources_in(resources: Any) -> list[tuple[str, str]]:
    """``(requests|limits, resource name)`` pairs of GPU extended resources in a ``resources`` dict."""
    resources = as_dict(resources)
    return [
        (section, name)
        for section in ("requests", "limits")
        for name in as_dict(resources.get(section))
        if isinstance(name, str) and is_legacy_gpu_resource(name)
    ]


def legacy_gpu_resources(container: dict[str, Any]) -> list[tuple[str, str]]:
    """``(requests|limits, resource name)`` pairs of GPU extended resources in a container."""
    return gpu_resources_in(container.get("resources"))


def implicit_device_class(name: str) -> str | None:
    """``<class>`` of ``deviceclass.resource.kubernetes.io/<class>``, else ``None``."""
    if name.startswith(IMPLICIT_EXTENDED_RESOURCE_PREFIX):
        cls = name[len(IMPLICIT_EXTENDED_RESOURCE_PREFIX):]
        return cls or None
    return None


def parse_dra_extended_resources(
    items: Mapping[str, str] | Iterable[str] | None, target: Target, where: str = "dra_extended_resources",
) -> dict[str, str]:
    """Check user declarations "the cluster maps extended resource NAME to DeviceClass CLASS".

    ``items`` is a mapping or ``NAME=CLASS`` strings. Extended resources served by DRA exist from
    Kubernetes 1.34 (KEP-5004), so declaring one for an older target is an error.
    """
    if not items:
        return {}
    pairs: list[tuple[str, str]] = []
    if isinstance(items, Mapping):
        pairs = [(str(k), str(v)) for k, v in items.items()]
    else:
        for item in items:
            name, eq, cls = str(item).partition("=")
            if not eq:
                raise DraConstructsError(where, "dra_extended_resources", item, "not NAME=CLASS",
                                         "write e.g. nvidia.com/gpu=gpu.nvidia.com")
            pairs.append((name.strip(), cls.strip()))
    out: dict[str, str] = {}
    for name, cls in pairs:
        if not _EXTENDED_NAME.match(name) or name.partition("/")[0].endswith("kubernetes.io"):
            raise DraConstructsError(where, "dra_extended_resources", name,
                                     "not an extended resource name one can declare (kubernetes.io names are "
                                     "Kubernetes' own; deviceclass.resource.kubernetes.io/* is always DRA)",
                                     "write DOMAIN/NAME, e.g. nvidia.com/gpu")
        if not _DNS_SUBDOMAIN.match(cls) or len(cls) > 253:
            raise DraConstructsError(where, "dra_extended_resources", cls, "not a DeviceClass name (DNS subdomain)",
                                     "name the DeviceClass that maps the resource, e.g. gpu.nvidia.com")
        out[name] = cls
    if not target.dra_extended_resources_exist:
        raise DraConstructsError(
            where, "dra_extended_resources", sorted(out),
            f"Kubernetes {target} cannot serve extended resources through DRA (KEP-5004 DRAExtendedResource "
            "exists from 1.34: alpha 1.34-1.35, on by default from 1.36)",
            "drop the declaration, or target the cluster's real version (1.34+)",
        )
    return out
