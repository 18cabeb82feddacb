"""Reach, DynamicMIG: the agent's inventory covers every device the catalog's DynamicMIG slices publish.

For the densest DynamicMIG node of each MIG-capable model the catalog ships (8 GPUs: A100 80GB,
H100 80GB, H200, B200; every placement of every profile, plus the whole GPU ``gpu-N``), the
agent's own enumeration (``NvmlPartitions.dynamic_devices`` merged by the runtime, as at start)
is compared with the names ``catalog_resource_slices(mig_mode="dynamic")`` publishes.

NVML is a fake of the calls ``dynamic_devices`` makes, answering per GPU what ``nvidia-smi mig
-lgip`` / ``-lgipp`` list (the catalog's profile table: GI profile ids, memorySizeMB, placements)
and the CUDA compute capability (``nvmlDeviceGetCudaComputeCapability``: 8.0 A100, 9.0 H100/H200,
10.0 B200). The names are the agent's own (go-nvlib's naming of profile index + memory), not
copied from the catalog. The whole GPU: the driver publishes it beside the placements only when
``!migEnabled || supportsMIGModeToggle`` (Hopper+, dra-driver-nvidia-gpu nvlib.go); with MIG
mode on, an A100 publishes no ``gpu-N``, which the catalog's synthetic slices still list.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import pytest

from dra_constructs.agent.backends.base import EnumerationResult
from dra_constructs.agent.backends.partitions import NvmlPartitions
from dra_constructs.agent.runtime import _with_placements
from dra_constructs.catalog import DRIVER, GPU_SPECS
from dra_constructs.catalog.devices import catalog_resource_slices

GPUS = 8
#: nvml.h NVML_GPU_INSTANCE_PROFILE_* index of each GI profile id (nvidia-smi mig -lgip "ID").
_INDEX = {19: 0x0, 20: 0x7, 15: 0x9, 14: 0x1, 9: 0x2, 5: 0x3, 0: 0x4}
#: CUDA compute capability major per model (NVML ``nvmlDeviceGetCudaComputeCapability``).
_CC = {"A100_80GB": 8, "H100_80GB": 9, "H200_141GB": 9, "B200_180GB": 10}


class _Placement(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


class _CatalogNvml:
    """The pynvml calls of ``dynamic_devices`` for 8 GPUs of one model, MIG mode on."""

    c_nvmlGpuInstancePlacement_t = _Placement

    def __init__(self, model: str) -> None:
        self.spec = next(s for s in GPU_SPECS if s.key == model)
        self.major = _CC[model]

    def nvmlDeviceGetCount(self) -> int:
        return GPUS

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetMinorNumber(self, gpu: int) -> int:
        return gpu

    def nvmlDeviceGetUUID(self, gpu: int) -> bytes:
        return f"GPU-{self.spec.key}-{gpu}".encode()

    def nvmlDeviceGetMemoryInfo(self, gpu: int) -> Any:
        return SimpleNamespace(total=self.spec.memory_mib << 20)

    def nvmlDeviceGetCudaComputeCapability(self, gpu: int) -> tuple[int, int]:
        return (self.major, 0)

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, gpu: int, profile_id: int, array: Any, count: Any) -> None:
        profile = next(p for p in self.spec.mig_profiles if p.profile_id == profile_id)
        for i, start in enumerate(profile.placements):
            array[i] = _Placement(start, profile.memory_slices)
        count._obj.value = len(profile.placements)


class _Devices:
    def __init__(self, nv: _CatalogNvml) -> None:
        self._nvml = nv

    def _call(self, op: str, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def _mig_enabled(self, gpu: Any) -> bool:
        return True

    def _gi_profiles(self, gpu: Any) -> dict[int, tuple[int, int]]:
        return {p.profile_id: (_INDEX[p.profile_id], p.memory_mib) for p in self._nvml.spec.mig_profiles}


def _published(model: str) -> set[str]:
    node = f"catalog-{model.lower().replace('_', '-')}"
    slices = catalog_resource_slices([model], gpus_per_node=GPUS, mig_mode="dynamic")
    return {d["name"] for s in slices if s["spec"]["nodeName"] == node and s["spec"]["driver"] == DRIVER
            for d in s["spec"].get("devices", [])}


@pytest.mark.parametrize("model", sorted(_CC))
def test_agent_inventory_covers_every_published_dynamic_mig_device(model: str) -> None:
    nv = _CatalogNvml(model)
    enumerated = EnumerationResult([], [])  # MIG on, no instance yet: NVML lists no MIG device
    inventory = {d.name for d in _with_placements(enumerated, NvmlPartitions(_Devices(nv))).devices}
    published = _published(model)
    whole = {f"gpu-{m}" for m in range(GPUS)}
    assert len(published) > 32  # more than one claim can hold: the agent's reach cannot come from a claim
    if nv.major >= 9:
        assert inventory == published
    else:  # Ampere, MIG on: the driver publishes placements only (the catalog's gpu-N is not on such a node)
        assert whole <= published and inventory == published - whole
