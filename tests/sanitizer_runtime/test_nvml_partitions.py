"""NvmlPartitions (cold reset, DynamicMIG) against an in-process fake of the pynvml calls it makes.

The stand-in libnvidia-ml has no GPU-instance create/destroy entry points, so this fake plays
NVML's GI/CI bookkeeping: placements, IN_USE on a GI with CIs, INSUFFICIENT_RESOURCES on
overlap. It checks the call sequence and arguments, not the driver.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.backends.partitions import NvmlPartitions, parse_mig_name
from dra_constructs.agent.devices import DeviceInfo


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_NotFound(NVMLError):
    pass


class NVMLError_InUse(NVMLError):
    pass


class NVMLError_InsufficientResources(NVMLError):
    pass


class Placement(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


@dataclass
class FakeGi:
    id: int
    profile_id: int
    start: int
    size: int
    cis: list[tuple[int, int, int]] = field(default_factory=list)  # (ci profile id, start, size)


class FakeNvml:
    """GPU 0 (minor 0, A100 80GB), MIG on; GI profiles 1g (id 19, 1 slice) and 2g (id 14, 2 slices)."""

    NVML_COMPUTE_INSTANCE_PROFILE_COUNT = 3
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
    NVMLError, NVMLError_NotSupported, NVMLError_NotFound = NVMLError, NVMLError_NotSupported, NVMLError_NotFound
    c_nvmlGpuInstancePlacement_t = Placement
    c_nvmlComputeInstancePlacement_t = Placement
    c_nvmlGpuInstance_t = ctypes.py_object
    c_nvmlComputeInstance_t = ctypes.py_object
    PROFILES = {19: (1, (0, 1, 2, 3, 4, 5, 6)), 14: (2, (0, 2, 4))}

    def __init__(self) -> None:
        self.gis: list[FakeGi] = []
        self.calls: list[str] = []
        self._next = 1
        self.busy: set[int] = set()  # GI ids with a process (destroying their CI: IN_USE)

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return "gpu"

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        assert uuid == "GPU-x"
        return "gpu"

    def nvmlDeviceGetMinorNumber(self, gpu: str) -> int:
        return 0

    def nvmlDeviceGetCudaComputeCapability(self, gpu: str) -> tuple[int, int]:
        return (8, 0)  # A100: Ampere, the driver publishes no whole-GPU device beside the placements

    def nvmlDeviceGetUUID(self, handle: Any) -> bytes:
        return b"GPU-x" if handle == "gpu" else f"MIG-{handle[1]}".encode()

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        return SimpleNamespace(total=80 << 30 if handle == "gpu" else 10 << 30)

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, gpu: str, profile_id: int) -> Any:
        return SimpleNamespace(id=profile_id, sliceCount=self.PROFILES[profile_id][0])

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, gpu: str, profile_id: int, array: Any, count: Any) -> None:
        size, starts = self.PROFILES[profile_id]
        for i, start in enumerate(starts):
            array[i].start, array[i].size = start, size
        count._obj.value = len(starts)

    def nvmlDeviceGetGpuInstances(self, gpu: str, profile_id: int, array: Any, count: Any) -> None:
        mine = [gi for gi in self.gis if gi.profile_id == profile_id]
        for i, gi in enumerate(mine):
            array[i] = gi
        count._obj.value = len(mine)

    def nvmlGpuInstanceGetInfo(self, gi: FakeGi) -> Any:
        return SimpleNamespace(id=gi.id, profileId=gi.profile_id, placement=SimpleNamespace(start=gi.start))

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, gpu: str, profile_id: int, placement: Any) -> FakeGi:
        where = placement._obj
        self.calls.append(f"create GI {profile_id}@{where.start}+{where.size}")
        if any(g.start < where.start + where.size and where.start < g.start + g.size for g in self.gis):
            raise NVMLError_InsufficientResources("Insufficient Resources")
        gi = FakeGi(self._next, profile_id, where.start, where.size)
        self._next += 1
        self.gis.append(gi)
        return gi

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: FakeGi, ci_profile: int, eng: int) -> Any:
        if ci_profile >= 2:
            raise NVMLError_NotSupported("Not Supported")
        return SimpleNamespace(id=ci_profile, sliceCount=ci_profile + 1)

    def nvmlGpuInstanceGetComputeInstances(self, gi: FakeGi, ci_profile_id: int, array: Any, count: Any) -> None:
        mine = [ci for ci in gi.cis if ci[0] == ci_profile_id]
        for i, ci in enumerate(mine):
            array[i] = (gi, ci)
        count._obj.value = len(mine)

    def nvmlComputeInstanceGetInfo(self, handle: Any) -> Any:
        _, (_, start, size) = handle
        return SimpleNamespace(placement=SimpleNamespace(start=start, size=size))

    def nvmlComputeInstanceDestroy(self, handle: Any) -> None:
        gi, ci = handle
        if gi.id in self.busy:
            raise NVMLError_InUse("In use by another client")
        self.calls.append(f"destroy CI {ci[0]}@{ci[1]}")
        gi.cis.remove(ci)

    def nvmlGpuInstanceDestroy(self, gi: FakeGi) -> None:
        if gi.cis:
            raise NVMLError_InUse("In use by another client")
        self.calls.append(f"destroy GI {gi.id}")
        self.gis.remove(gi)

    def nvmlGpuInstanceCreateComputeInstanceWithPlacement(self, gi: FakeGi, profile_id: int, placement: Any) -> None:
        self.calls.append(f"create CI {profile_id}@{placement._obj.start}")
        gi.cis.append((profile_id, placement._obj.start, placement._obj.size))

    def nvmlGpuInstanceCreateComputeInstance(self, gi: FakeGi, profile_id: int) -> None:
        self.calls.append(f"create CI {profile_id}")
        gi.cis.append((profile_id, 0, gi.size))

    def nvmlDeviceGetMaxMigDeviceCount(self, gpu: str) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, gpu: str, index: int) -> Any:
        if index >= len(self.gis):
            raise NVMLError_NotFound("Not Found")
        return ("mig", f"{self.gis[index].id}")

    def nvmlDeviceGetGpuInstanceId(self, mig: Any) -> int:
        return int(mig[1])

    def nvmlDeviceGetComputeInstanceId(self, mig: Any) -> int:
        return 0


class FakeDevices:
    """What NvmlPartitions uses of NvmlDevices: the module, the error mapping, MIG mode, profiles."""

    def __init__(self, nv: FakeNvml) -> None:
        self._nvml = nv

    def _call(self, op: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except NVMLError as error:
            raise BackendError(op, f"{type(error).__name__}: {error}") from error

    def _mig_enabled(self, gpu: Any) -> bool:
        return True

    def _gi_profiles(self, gpu: Any) -> dict[int, tuple[int, int]]:
        return {19: (0x0, 9856), 14: (0x1, 19968)}


def _parts() -> tuple[FakeNvml, NvmlPartitions]:
    nv = FakeNvml()
    return nv, NvmlPartitions(FakeDevices(nv))


def test_dynamic_placements_are_named_like_the_driver_names_mig_devices() -> None:
    _, parts = _parts()
    devices = {d.name: d for d in parts.dynamic_devices()}
    assert sorted(devices) == sorted([f"gpu-0-mig-1g10gb-19-{s}" for s in range(7)] + [
        f"gpu-0-mig-2g20gb-14-{s}" for s in (0, 2, 4)])
    two = devices["gpu-0-mig-2g20gb-14-4"]
    assert two.placement == (14, 4, 2) and two.dynamic and two.uuid == "DYN-GPU-x-14-4"
    assert two.memory_bytes == 19968 << 20 and two.mig_profile == "2g.20gb"
    assert two.overlaps(devices["gpu-0-mig-1g10gb-19-5"]) and not two.overlaps(devices["gpu-0-mig-1g10gb-19-3"])
    assert parse_mig_name("gpu-0-mig-1g10gb-me-20-3") == (20, 3)


def test_reset_destroys_and_recreates_the_same_layout_at_the_same_placement() -> None:
    nv, parts = _parts()
    device = DeviceInfo("gpu-0-mig-2g20gb-14-2", "MIG-old", 0, 20 << 30, parent_uuid="GPU-x", mig_profile="2g.20gb")
    nv.gis.append(FakeGi(7, 14, 2, 2, cis=[(0, 0, 1), (0, 1, 1)]))  # two 1-slice CIs
    found = parts.instance(device)
    assert found is not None and found.gpu_instance_id == 7  # the MIG capability files of devhandles.py
    parts.destroy(device)
    assert nv.calls == ["destroy CI 0@0", "destroy CI 0@1", "destroy GI 7"] and parts.instance(device) is None
    new = parts.create(device)
    assert nv.calls[3:] == ["create GI 14@2+2", "create CI 0@0", "create CI 0@1"]
    assert new.name == device.name and new.uuid == "MIG-1" != device.uuid


def test_transient_instance_gets_one_full_compute_instance_and_overlaps_are_refused() -> None:
    nv, parts = _parts()
    by_name = {d.name: d for d in parts.dynamic_devices()}
    placement = by_name["gpu-0-mig-1g10gb-19-3"]
    created = parts.create(placement)
    assert nv.calls == ["create GI 19@3+1", "create CI 0"] and created.uuid.startswith("MIG-")
    with pytest.raises(BackendError, match="InsufficientResources"):
        parts.create(by_name["gpu-0-mig-2g20gb-14-2"])  # 2g at 2 overlaps slice 3
    nv.gis[0].cis.append((0, 0, 1))
    nv.busy.add(nv.gis[0].id)
    with pytest.raises(BackendError, match="InUse"):
        parts.destroy(placement)
