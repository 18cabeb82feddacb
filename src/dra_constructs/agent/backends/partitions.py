"""PartitionBackend over NVML: MIG instances at a placement (cold reset, DynamicMIG) and GPU reset.

NVML calls (nvml.h, reference gpu-sanitization.md 1.5/1.6): ``nvmlDeviceGetGpuInstances`` and
``nvmlGpuInstanceGetInfo`` find the GPU instance (GI) at a placement start;
``nvmlGpuInstanceGetComputeInstances`` + ``nvmlComputeInstanceGetInfo`` record its compute
instances (CIs) so that a reset recreates the same layout; ``nvmlComputeInstanceDestroy`` and
``nvmlGpuInstanceDestroy`` (``IN_USE`` while processes or CIs are active) destroy them;
``nvmlDeviceCreateGpuInstanceWithPlacement`` and ``nvmlGpuInstanceCreateComputeInstanceWithPlacement``
recreate them (``INSUFFICIENT_RESOURCES`` when another instance holds the slices). NVML has no
public whole-GPU reset (only clock/NvLink resets), so :meth:`NvmlPartitions.reset_gpu` runs
``nvidia-smi --gpu-reset -i <uuid>``, which needs root and no client on the GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import subprocess
from dataclasses import replace
from typing import Any

from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.devices import DeviceInfo, gpu_device_name, mig_device_name, mig_profile_name

__all__ = ["NvmlPartitions", "compute_instances", "parse_mig_name", "whole_gpu_device"]

_MiB = 1 << 20

_MAX_INSTANCES = 8

#: CUDA compute capability major of Hopper: the DRA driver publishes the whole GPU beside the
#: placements from Hopper on (dra-driver-nvidia-gpu nvlib.go ``supportsMIGModeToggle``: arch >=
#: NVML_DEVICE_ARCH_HOPPER; MIG-capable GPUs of CC 9.x and newer are exactly those).
_HOPPER_MAJOR = 9


def parse_mig_name(name: str) -> tuple[int, int]:
    """``(gi profile id, placement start)`` from ``gpu-<minor>-mig-<profile>-<profileId>-<start>``."""
    try:
        _, profile_id, start = name.rsplit("-", 2)
        return int(profile_id), int(start)
    except ValueError as error:
        raise BackendError("parse device name", f"{name!r} is not a MIG device name", fatal=True) from error



def compute_instances(nv: Any, gi: Any) -> list[tuple[int, Any]]:
    """(CI profile id, handle) of every compute instance of GPU instance ``gi`` (pynvml module ``nv``).

    A CI profile the GI does not serve (NOT_SUPPORTED) is skipped; any other NVML error raises.
    """
    found: list[tuple[int, Any]] = []
    for ci_profile in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
        array = (nv.c_nvmlComputeInstance_t * _MAX_INSTANCES)()
        count = ctypes.c_uint(_MAX_INSTANCES)
        try:
            info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gi, ci_profile, nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            nv.nvmlGpuInstanceGetComputeInstances(gi, info.id, array, ctypes.byref(count))
        except nv.NVMLError_NotSupported:
            continue
        except nv.NVMLError as error:
            raise BackendError("nvmlGpuInstanceGetComputeInstances", str(error)) from error
        found.extend((int(info.id), array[index]) for index in range(count.value))
    return found


class NvmlPartitions:
    """Uses an ``NvmlDevices`` (its pynvml module and error mapping)."""

    def __init__(self, devices: Any) -> None:
        self._dev = devices
        self._nv: Any = devices._nvml
        self._layouts: dict[str, list[tuple[int, int, int]]] = {}  # name -> [(ci profile, start, size)]

    def _call(self, op: str, fn: Any, *args: Any) -> Any:
        result = self._dev._call(op, fn, *args)
        return result

    def _gpu(self, device: DeviceInfo) -> Any:
        uuid = device.parent_uuid or device.uuid
        return self._call("nvmlDeviceGetHandleByUUID", self._nv.nvmlDeviceGetHandleByUUID, uuid)

    def _where(self, device: DeviceInfo) -> tuple[int, int]:
        if device.placement is not None:
            return device.placement[0], device.placement[1]
        return parse_mig_name(device.name)

    def _gi(self, device: DeviceInfo) -> Any | None:
        nv = self._nv
        profile_id, start = self._where(device)
        if profile_id < 0:
            return None  # the whole GPU of a GPU without a full-size GI profile: no instance can be there
        gpu = self._gpu(device)
        array = (nv.c_nvmlGpuInstance_t * _MAX_INSTANCES)()
        count = ctypes.c_uint(_MAX_INSTANCES)
        self._call("nvmlDeviceGetGpuInstances", nv.nvmlDeviceGetGpuInstances, gpu, profile_id, array,
                   ctypes.byref(count))
        for index in range(count.value):
            info = self._call("nvmlGpuInstanceGetInfo", nv.nvmlGpuInstanceGetInfo, array[index])
            if int(info.placement.start) == start:
                return array[index]
        return None

    def mig_enabled(self, device: DeviceInfo) -> bool:
        """The current MIG mode of the device's GPU (the driver toggles it per claim on Hopper+)."""
        return bool(self._dev._mig_enabled(self._gpu(device)))

    def gpu_instance_exists(self, device: DeviceInfo) -> bool:
        """A GPU instance at the placement, with or without compute instances."""
        return self._gi(device) is not None

    def instance(self, device: DeviceInfo) -> DeviceInfo | None:
        nv = self._nv
        if not device.is_mig and not device.dynamic:
            return device
        if device.dynamic and not self.mig_enabled(device):
            # MIG mode off (Hopper+, the driver toggles it): no instance at any placement; the whole
            # GPU is the CUDA device
            return device if device.whole_gpu else None
        gi = self._gi(device)
        if gi is None:
            return None
        gi_id = int(self._call("nvmlGpuInstanceGetInfo", nv.nvmlGpuInstanceGetInfo, gi).id)
        gpu = self._gpu(device)
        cis: list[tuple[int, str, Any]] = []  # (CI id, UUID, handle) of every CI of the GI
        for index in range(int(self._call("nvmlDeviceGetMaxMigDeviceCount", nv.nvmlDeviceGetMaxMigDeviceCount, gpu))):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, index)
            except nv.NVMLError_NotFound:
                continue
            except nv.NVMLError as error:  # a CI we cannot see could hold a context: not "no instance"
                raise BackendError("nvmlDeviceGetMigDeviceHandleByIndex", f"MIG index {index}: {error}") from error
            if int(self._call("nvmlDeviceGetGpuInstanceId", nv.nvmlDeviceGetGpuInstanceId, mig)) != gi_id:
                continue
            ci_id = int(self._call("nvmlDeviceGetComputeInstanceId", nv.nvmlDeviceGetComputeInstanceId, mig))
            uuid = self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, mig)
            cis.append((ci_id, uuid.decode() if isinstance(uuid, bytes) else str(uuid), mig))
        if not cis:
            return None  # a GI without a CI: no MIG device handle, nothing can hold a context on it
        cis.sort(key=lambda ci: ci[0])
        memory = self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, cis[0][2])
        # Every CI of the instance as it is now: the drain and the checks list the processes of each
        # (a recreated instance has new CI UUIDs; the old ones no longer resolve).
        return replace(device, uuid=cis[0][1], memory_bytes=int(memory.total), parent_uuid=device.gpu_uuid,
                       compute_instance_uuids=tuple(ci[1] for ci in cis), gpu_instance_id=gi_id,
                       compute_instance_ids=tuple(ci[0] for ci in cis))

    def destroy(self, device: DeviceInfo) -> None:
        nv = self._nv
        gi = self._gi(device)
        if gi is None:
            return
        layout: list[tuple[int, int, int]] = []
        for profile_id, ci in compute_instances(nv, gi):
            ci_info = self._call("nvmlComputeInstanceGetInfo", nv.nvmlComputeInstanceGetInfo, ci)
            layout.append((profile_id, int(ci_info.placement.start), int(ci_info.placement.size)))
            self._call("nvmlComputeInstanceDestroy", nv.nvmlComputeInstanceDestroy, ci)
        self._layouts[device.name] = layout
        self._call("nvmlGpuInstanceDestroy", nv.nvmlGpuInstanceDestroy, gi)

    def create(self, device: DeviceInfo) -> DeviceInfo:
        nv = self._nv
        gpu = self._gpu(device)
        profile_id, start = self._where(device)
        if profile_id < 0:
            raise BackendError("create", "this GPU has no GPU-instance profile over every memory slice: the whole "
                               "GPU cannot be filled while MIG mode is on", fatal=True)
        profile = self._call("nvmlDeviceGetGpuInstanceProfileInfoById",
                             nv.nvmlDeviceGetGpuInstanceProfileInfoById, gpu, profile_id)
        placements = (nv.c_nvmlGpuInstancePlacement_t * _MAX_INSTANCES)()
        count = ctypes.c_uint(_MAX_INSTANCES)
        self._call("nvmlDeviceGetGpuInstancePossiblePlacements", nv.nvmlDeviceGetGpuInstancePossiblePlacements,
                   gpu, profile_id, placements, ctypes.byref(count))
        chosen = next((placements[i] for i in range(count.value) if int(placements[i].start) == start), None)
        if chosen is None:
            raise BackendError("nvmlDeviceGetGpuInstancePossiblePlacements",
                               f"no placement starting at {start} for GI profile {profile_id}", fatal=True)
        gi = self._call("nvmlDeviceCreateGpuInstanceWithPlacement", nv.nvmlDeviceCreateGpuInstanceWithPlacement,
                        gpu, profile_id, ctypes.byref(chosen))
        layout = self._layouts.get(device.name)
        try:
            self._create_compute_instances(device, gi, int(profile.sliceCount))
        except BackendError:
            # A GI without (all) its CIs would be an orphan holding the slices: destroy what was made.
            with contextlib.suppress(BackendError):  # else the barrier finds the CI-less GI and destroys it
                self.destroy(device)
            if layout:
                self._layouts[device.name] = layout  # the recreate still owes this layout
            raise
        found = self.instance(device)
        if found is None:
            raise BackendError("nvmlDeviceCreateGpuInstanceWithPlacement", "created, but no MIG device appeared")
        return found

    def _create_compute_instances(self, device: DeviceInfo, gi: Any, gi_slices: int) -> None:
        nv = self._nv
        layout = self._layouts.pop(device.name, None)
        if layout:
            for ci_profile_id, ci_start, ci_size in layout:
                where = nv.c_nvmlComputeInstancePlacement_t(ci_start, ci_size)
                self._call("nvmlGpuInstanceCreateComputeInstanceWithPlacement",
                           nv.nvmlGpuInstanceCreateComputeInstanceWithPlacement, gi, ci_profile_id,
                           ctypes.byref(where))
        else:  # one CI over the whole GI (what the DRA driver creates for a MIG device)
            full = None
            for ci_profile in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
                try:
                    info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                        gi, ci_profile, nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
                except nv.NVMLError:
                    continue
                if int(info.sliceCount) == gi_slices:
                    full = info
            if full is None:
                raise BackendError("nvmlGpuInstanceGetComputeInstanceProfileInfo", "no full-size CI profile")
            self._call("nvmlGpuInstanceCreateComputeInstance", nv.nvmlGpuInstanceCreateComputeInstance, gi, full.id)

    def reset_gpu(self, device: DeviceInfo, timeout_s: float) -> DeviceInfo:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            raise BackendError("gpu reset", "nvidia-smi not found (NVML has no public reset call); "
                               "use partition_reset: mig-instance or off", fatal=True)
        try:
            done = subprocess.run([smi, "--gpu-reset", "-i", device.uuid], capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as error:
            raise BackendError("nvidia-smi --gpu-reset", f"timed out after {timeout_s:g}s", fatal=True) from error
        if done.returncode != 0:
            text = (done.stderr or done.stdout).strip().splitlines()
            raise BackendError("nvidia-smi --gpu-reset", f"exit {done.returncode}: {' '.join(text)[:300]} "
                               "(IN_USE: another client holds the GPU)")
        return device

    def dynamic_devices(self) -> list[DeviceInfo]:
        """DynamicMIG: every possible placement of every MIG-enabled GPU, as the driver advertises them.

        Named like static MIG devices (profile, GI profile id, placement start: the driver's
        canonical name; [INFER] that DynamicMIG keeps it), with a stable placeholder UUID
        (``DYN-<gpu uuid>-<profile id>-<start>``); the instance's real UUID comes from
        :meth:`instance` while it exists. On Hopper and newer the whole GPU ``gpu-N`` too (the
        driver publishes it beside the placements, on the same counters): its placement spans
        every memory slice (the full-size GI profile), so it overlaps each placement.
        """
        nv = self._nv
        found: list[DeviceInfo] = []
        for index in range(int(self._call("nvmlDeviceGetCount", nv.nvmlDeviceGetCount))):
            gpu = self._call("nvmlDeviceGetHandleByIndex", nv.nvmlDeviceGetHandleByIndex, index)
            if not self._dev._mig_enabled(gpu):
                continue
            minor = int(self._call("nvmlDeviceGetMinorNumber", nv.nvmlDeviceGetMinorNumber, gpu))
            raw = self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, gpu)
            gpu_uuid = raw.decode() if isinstance(raw, bytes) else str(raw)
            total = int(self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, gpu).total)
            placed: list[DeviceInfo] = []
            for profile_id, (profile_index, memory_mb) in sorted(self._dev._gi_profiles(gpu).items()):
                profile = mig_profile_name(profile_index, memory_mb, total)
                if profile is None:
                    continue
                placements = (nv.c_nvmlGpuInstancePlacement_t * _MAX_INSTANCES)()
                count = ctypes.c_uint(_MAX_INSTANCES)
                self._call("nvmlDeviceGetGpuInstancePossiblePlacements",
                           nv.nvmlDeviceGetGpuInstancePossiblePlacements, gpu, profile_id, placements,
                           ctypes.byref(count))
                for i in range(count.value):
                    start, size = int(placements[i].start), int(placements[i].size)
                    placed.append(DeviceInfo(
                        mig_device_name(minor, profile, profile_id, start), f"DYN-{gpu_uuid}-{profile_id}-{start}",
                        minor, memory_mb * _MiB, parent_uuid=gpu_uuid, mig_profile=profile,
                        placement=(profile_id, start, size), dynamic=True,
                    ))
            found.extend(placed)
            major, _ = self._call("nvmlDeviceGetCudaComputeCapability", nv.nvmlDeviceGetCudaComputeCapability, gpu)
            if placed and int(major) >= _HOPPER_MAJOR:
                found.append(whole_gpu_device(minor, gpu_uuid, total, placed))
        return found


def whole_gpu_device(minor: int, gpu_uuid: str, total: int, placements: list[DeviceInfo]) -> DeviceInfo:
    """DynamicMIG's ``gpu-N``: the GPU itself, placed over every memory slice (the full-size GI profile)."""
    slices = max(p.placement[1] + p.placement[2] for p in placements if p.placement is not None)
    full = next((p.placement for p in placements if p.placement is not None and p.placement[1:] == (0, slices)),
                (-1, 0, slices))  # no full-size profile: a create there fails, and the barrier quarantines
    return DeviceInfo(gpu_device_name(minor), gpu_uuid, minor, total, placement=full, dynamic=True, whole_gpu=True)
