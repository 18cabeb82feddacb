"""Synthetic ResourceSlices shaped like the AMD GPU DRA driver's, built from the AMD catalog.

One node per (model, partition profile), every GPU of it in that profile (partitions are
pre-created by AMD's tooling; the driver does not re-partition). In SPX a GPU is one ``amdgpu``
device; in any other mode only its partitions are published (``discovery.go``
``enumerateAllPossibleDevices``). Device names are ``gpu-<cardIndex>-<renderIndex>``; we number
cards and render nodes in order (partition ``p`` of GPU ``g``: card ``g*n+p``, render ``128+g*n+p``),
which real nodes need not do. Values that identify hardware (``deviceID``, PCI addresses) are
stable fakes: ``deviceID`` a decimal 64-bit KFD ``unique_id``, shared by a GPU's partitions.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from dra_constructs.catalog.amd import (
    AMD_DRIVER,
    AMD_GPU_SPECS,
    AMD_TYPE_GPU,
    AMD_TYPE_PARTITION,
    AmdGpuSpec,
    AmdPartitionProfile,
)
from dra_constructs.catalog.network import gpu_topology

__all__ = ["amd_node_name", "amd_resource_slices"]

_NAMESPACE = uuid.UUID("2b5f3c1e-7d0a-4e8b-9c3f-a1d2e3f40516")
#: ``driverVersion`` as in the driver's demo (amdgpu 6.12.12, ROCm 7.0) and a source-version hash.
_DRIVER_VERSION = "6.12.12"
_DRIVER_SRC_VERSION = "7AA72EC2C8F513519BE86FD"
_STANDARD = "resource.kubernetes.io"


def amd_node_name(spec: AmdGpuSpec, profile: AmdPartitionProfile) -> str:
    """The catalog node of ``spec`` in ``profile``: ``catalog-amd-mi300x-cpx-nps4``."""
    return f"catalog-amd-{spec.key.lower()}-{profile.name.replace('_', '-')}"


def _device_id(node: str, gpu: int) -> str:
    return str(uuid.uuid5(_NAMESPACE, f"{node}/{gpu}").int >> 64)


def _pci(gpu: int) -> str:
    return f"0000:{0x11 + 0x10 * gpu:02x}:00.0"


def _device(spec: AmdGpuSpec, profile: AmdPartitionProfile, node: str, gpu: int, part: int,
            gpus: int) -> dict[str, Any]:
    index = gpu * profile.max_count + part
    root, _ = gpu_topology(gpu, gpus)
    common = {
        "cardIndex": {"int": index},
        "renderIndex": {"int": 128 + index},
        "family": {"string": spec.family},
        "productName": {"string": spec.product_name},
        "driverVersion": {"version": _DRIVER_VERSION},
        "driverSrcVersion": {"string": _DRIVER_SRC_VERSION},
        "partitionProfile": {"string": profile.name},
        f"{_STANDARD}/pcieRoot": {"string": root},
    }
    if profile.whole_gpu:
        identity = {"type": {"string": AMD_TYPE_GPU}, "pciAddr": {"string": _pci(gpu)},
                    "deviceID": {"string": _device_id(node, gpu)}}
    else:
        identity = {"type": {"string": AMD_TYPE_PARTITION}, "parentPciAddr": {"string": _pci(gpu)},
                    "parentDeviceID": {"string": _device_id(node, gpu)}}
    return {
        "name": f"gpu-{index}-{128 + index}",
        "attributes": {**identity, **common},
        "capacity": {
            "memory": {"value": f"{profile.memory_bytes // (1024 * 1024)}Mi"},
            "computeUnits": {"value": str(profile.compute_units)},
            "simdUnits": {"value": str(profile.simd_units)},
        },
    }


def amd_resource_slices(models: Iterable[str] | None = None, gpus_per_node: int = 8,
                        resource_version: str = "v1") -> list[dict[str, Any]]:
    """One ResourceSlice per catalog node (model x valid profile); ``v1beta1`` nests under ``basic``."""
    wanted = {m.upper() for m in models} if models is not None else None
    slices = []
    for spec in AMD_GPU_SPECS:
        if wanted is not None and spec.key not in wanted:
            continue
        for profile in spec.profiles:
            node = amd_node_name(spec, profile)
            devices = [_device(spec, profile, node, gpu, part, gpus_per_node)
                       for gpu in range(gpus_per_node) for part in range(profile.max_count)]
            if resource_version == "v1beta1":
                devices = [{"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
                           for d in devices]
            slices.append({
                "apiVersion": f"resource.k8s.io/{resource_version}",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-{AMD_DRIVER}"},
                "spec": {"driver": AMD_DRIVER, "nodeName": node,
                         "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                         "devices": devices},
            })
    return slices
