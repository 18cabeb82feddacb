"""Synthetic ResourceSlices shaped exactly like the NVIDIA DRA driver's, built from the catalog.

They are the default inventory for "is this request satisfiable?" checks at synth time: one
node per GPU model with whole GPUs, and one node per (model, MIG profile) whose GPUs are each
partitioned into the most instances of that profile (like mig-parted's ``all-<profile>``).
Device names follow the driver at HEAD: ``gpu-<minor>`` and
``gpu-<parentMinor>-mig-<profile>-<profileId>-<placementStart>``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from .data import GPU_SPECS
from .driver import ATTRIBUTE_DOMAIN, DRIVER, STANDARD_ATTRIBUTE_DOMAIN
from .models import GpuSpec, MigProfile

__all__ = ["catalog_resource_slices"]

_DRIVER_VERSION = "570.158.1"
_CUDA_DRIVER_VERSION = "12.8.0"
_NAMESPACE = uuid.UUID("6f1c2f5e-1f0a-4c3e-9a51-0d2a6c1b7e42")


def _uuid(prefix: str, *parts: str) -> str:
    return f"{prefix}-{uuid.uuid5(_NAMESPACE, '/'.join(parts))}"


def _gpu_attributes(spec: GpuSpec, minor: int, node: str) -> dict[str, dict[str, Any]]:
    return {
        "type": {"string": "gpu"},
        "uuid": {"string": _uuid("GPU", node, str(minor))},
        "productName": {"string": spec.product_names[0]},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": spec.architecture},
        "cudaComputeCapability": {"version": spec.compute_capability},
        "driverVersion": {"version": _DRIVER_VERSION},
        "cudaDriverVersion": {"version": _CUDA_DRIVER_VERSION},
        f"{STANDARD_ATTRIBUTE_DOMAIN}/pcieRoot": {"string": f"pci0000:{minor:02x}"},
    }


def _mig_device(spec: GpuSpec, profile: MigProfile, minor: int, index: int, node: str) -> dict[str, Any]:
    parent = _gpu_attributes(spec, minor, node)
    attributes = {
        **parent,
        "type": {"string": "mig"},
        "uuid": {"string": _uuid("MIG", node, str(minor), profile.name, str(index))},
        "parentUUID": parent["uuid"],
        "profile": {"string": profile.name},
    }
    placement = index * profile.memory_slices
    capacity = {
        "multiprocessors": {"value": str(profile.multiprocessors)},
        "copyEngines": {"value": str(profile.compute_slices)},
        "decoders": {"value": str(profile.compute_slices // 2 + (1 if profile.media_extensions else 0))},
        "encoders": {"value": "0"},
        "jpegEngines": {"value": "1" if profile.media_extensions or profile.compute_slices == 7 else "0"},
        "ofaEngines": {"value": "1" if profile.media_extensions or profile.compute_slices == 7 else "0"},
        "memory": {"value": f"{profile.memory_mib}Mi"},
        **{f"memorySlice{placement + s}": {"value": "1"} for s in range(profile.memory_slices)},
    }
    name = f"gpu-{minor}-mig-{profile.device_name_part}-{profile.profile_id}-{placement}"
    return {"name": name, "attributes": attributes, "capacity": capacity}


def _slice(node: str, devices: list[dict[str, Any]], resource_version: str) -> dict[str, Any]:
    if resource_version == "v1beta1":
        devices = [{"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}} for d in devices]
    return {
        "apiVersion": f"resource.k8s.io/{resource_version}",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def catalog_resource_slices(
    models: Iterable[str] | None = None,
    gpus_per_node: int = 8,
    resource_version: str = "v1",
) -> list[dict[str, Any]]:
    """ResourceSlices for every catalog model (or those in ``models``, by key).

    ``resource_version`` picks the shape: ``v1beta1`` nests attributes under ``basic``.
    """
    wanted = set(models) if models is not None else None
    slices: list[dict[str, Any]] = []
    for spec in GPU_SPECS:
        if wanted is not None and spec.key not in wanted:
            continue
        node = f"catalog-{spec.key.lower().replace('_', '-')}"
        whole = [
            {
                "name": f"gpu-{minor}",
                "attributes": _gpu_attributes(spec, minor, node),
                "capacity": {"memory": {"value": f"{spec.memory_mib}Mi"}},
            }
            for minor in range(gpus_per_node)
        ]
        slices.append(_slice(node, whole, resource_version))
        for profile in spec.mig_profiles:
            mig_node = f"{node}-{profile.device_name_part}"
            devices = [
                _mig_device(spec, profile, minor, index, mig_node)
                for minor in range(gpus_per_node)
                for index in range(profile.max_count)
            ]
            slices.append(_slice(mig_node, devices, resource_version))
    return slices


_ = ATTRIBUTE_DOMAIN  # the NVIDIA attributes above are unqualified: they live under the driver's domain
