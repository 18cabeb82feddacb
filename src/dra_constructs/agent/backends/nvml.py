"""NVML backend (``pynvml`` from NVIDIA's ``nvidia-ml-py``; imported lazily).

Facts (reference gpu-sanitization.md section 1): PIDs come back in the caller's PID namespace
and invisible ones are silently dropped, so the agent needs ``hostPID: true``
(:func:`host_pid_namespace` checks it); MIG devices are queried through their MIG handles.
Compute mode resets to DEFAULT on reboot. On MIG it depends on the driver's NVML: every nvml.h
from CUDA 11.1 to 13.2.1 says "On MIG-enabled GPUs, compute mode would be set to DEFAULT and
changing it is not supported" (R535-R580, what users run); the CUDA 13.3 header first takes a
MIG device handle (NVIDIA/go-nvml 8b8585b). :meth:`NvmlDevices.set_compute_mode` raises
:class:`ComputeModeUnsupported` there, and reads every MIG mode back, so a value NVML accepts
but does not apply is never taken for a guard.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from dra_constructs.agent.backends.base import (
    BackendError,
    ComputeMode,
    ComputeModeUnsupported,
    EnumerationError,
    EnumerationFailed,
    EnumerationResult,
    MemoryInfo,
    host_pid_namespace,
)
from dra_constructs.agent.devices import DeviceInfo, gpu_device_name, mig_device_name, mig_profile_name

__all__ = ["NvmlDevices", "host_pid_namespace", "scrub_on_free_disabled"]

_PARAMS = Path("/proc/driver/nvidia/params")


def scrub_on_free_disabled(params_text: str | None = None) -> bool | None:
    """True if ``RMDisableScrubOnFree=1`` is in the driver's RegistryDwords; None if unknown.

    Reads ``/proc/driver/nvidia/params`` (lines ``RegistryDwords: "A=1;B=2"`` and
    ``RegistryDwordsPerDevice: "..."``), reference section 3.2.
    """
    if params_text is None:
        try:
            params_text = _PARAMS.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    for line in params_text.splitlines():
        key, _, value = line.partition(":")
        if not key.strip().startswith("RegistryDwords"):
            continue
        for entry in value.strip().strip('"').replace(",", ";").split(";"):
            name, _, setting = entry.partition("=")
            if name.strip().lower() == "rmdisablescrubonfree":
                try:
                    if int(setting.strip(), 0) != 0:
                        return True
                except ValueError:
                    return True  # unparseable value for this key: assume the worst
    return False


class NvmlDevices:
    """NvmlBackend over real NVML; one ``nvmlInit`` per agent, handles re-looked-up by UUID.

    MIG: the unit is the GPU instance. NVML given a MIG device handle answers for that
    compute instance only (processes, compute mode), so every call that must cover the GI
    goes to the handles of all its compute instances. Names come from the GI profile
    (:func:`..devices.mig_profile_name`), as the DRA driver builds them, never from
    ``nvmlDeviceGetName``.
    """

    def __init__(self) -> None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError as error:
            raise BackendError("import pynvml", "nvidia-ml-py is not installed (extra `gpu`)", True) from error
        self._nvml: Any = pynvml
        self._lock = threading.Lock()
        self._handles: dict[str, list[Any]] = {}
        self._call("nvmlInit", pynvml.nvmlInit)

    def _call(self, op: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nvml.NVMLError as error:
            lost = isinstance(error, getattr(self._nvml, "NVMLError_GpuIsLost", ()))
            raise BackendError(op, str(error), fatal=lost) from error

    def enumerate(self) -> EnumerationResult:
        nv = self._nvml
        found: list[DeviceInfo] = []
        errors: list[EnumerationError] = []
        handles: dict[str, list[Any]] = {}
        count = self._call("nvmlDeviceGetCount", nv.nvmlDeviceGetCount)
        for index in range(count):
            minor: int | None = None
            uuid: str | None = None
            try:
                gpu = self._call("nvmlDeviceGetHandleByIndex", nv.nvmlDeviceGetHandleByIndex, index)
                minor = int(self._call("nvmlDeviceGetMinorNumber", nv.nvmlDeviceGetMinorNumber, gpu))
                uuid = _text(self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, gpu))
                if not self._mig_enabled(gpu):
                    memory = self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, gpu)
                    found.append(DeviceInfo(gpu_device_name(minor), uuid, minor, int(memory.total)))
                    handles[uuid] = [gpu]
                    continue
                total = int(self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, gpu).total)
                migs, mig_errors = self._mig_devices(index, gpu, minor, uuid, total)
            except BackendError as error:
                errors.append(EnumerationError(index, error.op, str(error).partition(": ")[2] or str(error),
                                               error.fatal, minor, uuid))
                continue
            errors.extend(mig_errors)
            for info, mig_handles in migs:
                found.append(info)
                handles[info.uuid] = mig_handles
        with self._lock:
            self._handles = handles
        return EnumerationResult(found, errors)

    def devices(self) -> list[DeviceInfo]:
        result = self.enumerate()
        if result.errors:
            raise EnumerationFailed(result)
        return result.devices

    def _mig_enabled(self, gpu: Any) -> bool:
        nv = self._nvml
        try:
            return bool(nv.nvmlDeviceGetMigMode(gpu)[0] == 1)
        except nv.NVMLError_NotSupported:
            return False  # no MIG on this GPU
        except nv.NVMLError as error:
            raise BackendError("nvmlDeviceGetMigMode", str(error),
                               fatal=isinstance(error, nv.NVMLError_GpuIsLost)) from error

    def _mig_devices(self, index: int, gpu: Any, minor: int, gpu_uuid: str, total: int,
                     ) -> tuple[list[tuple[DeviceInfo, list[Any]]], list[EnumerationError]]:
        """One DeviceInfo per GPU instance (with the handles of all its CIs), and what failed."""
        nv = self._nvml
        errors: list[EnumerationError] = []
        by_gi: dict[int, list[tuple[int, Any, str]]] = {}
        for mig_index in range(self._call("nvmlDeviceGetMaxMigDeviceCount", nv.nvmlDeviceGetMaxMigDeviceCount, gpu)):
            try:
                mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, mig_index)
            except nv.NVMLError_NotFound:
                continue  # no MIG device at this index
            except nv.NVMLError as error:  # GPU_IS_LOST, NO_PERMISSION...: a device we cannot see
                errors.append(EnumerationError(index, "nvmlDeviceGetMigDeviceHandleByIndex",
                                               f"MIG index {mig_index}: {error}",
                                               isinstance(error, nv.NVMLError_GpuIsLost), minor, gpu_uuid))
                continue
            try:
                gi_id = int(self._call("nvmlDeviceGetGpuInstanceId", nv.nvmlDeviceGetGpuInstanceId, mig))
                ci_id = int(self._call("nvmlDeviceGetComputeInstanceId", nv.nvmlDeviceGetComputeInstanceId, mig))
                mig_uuid = _text(self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, mig))
            except BackendError as error:
                errors.append(EnumerationError(index, error.op, f"MIG index {mig_index}: {error}", error.fatal,
                                               minor, gpu_uuid))
                continue
            by_gi.setdefault(gi_id, []).append((ci_id, mig, mig_uuid))
        profiles = self._gi_profiles(gpu)
        out: list[tuple[DeviceInfo, list[Any]]] = []
        for gi_id, cis in sorted(by_gi.items()):
            cis.sort(key=lambda ci: ci[0])
            try:
                gi = self._call("nvmlDeviceGetGpuInstanceById", nv.nvmlDeviceGetGpuInstanceById, gpu, gi_id)
                info = self._call("nvmlGpuInstanceGetInfo", nv.nvmlGpuInstanceGetInfo, gi)
                profile_id = int(info.profileId)
                if profile_id not in profiles:
                    raise BackendError("nvmlDeviceGetGpuInstanceProfileInfo",
                                       f"no known GPU-instance profile has id {profile_id}")
                profile_index, memory_mb = profiles[profile_id]
                profile = mig_profile_name(profile_index, memory_mb, total)
                if profile is None:
                    raise BackendError("nvmlDeviceGetGpuInstanceProfileInfo",
                                       f"profile index {profile_index} has no name the DRA driver would give")
                memory = self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, cis[0][1])
            except BackendError as error:
                errors.append(EnumerationError(index, error.op, str(error).partition(": ")[2] or str(error),
                                               error.fatal, minor, gpu_uuid, gi_id))
                continue
            device = DeviceInfo(
                mig_device_name(minor, profile, profile_id, int(info.placement.start)), cis[0][2], minor,
                int(memory.total), parent_uuid=gpu_uuid, mig_profile=profile,
                compute_instance_uuids=tuple(ci[2] for ci in cis),
                gpu_instance_id=gi_id, compute_instance_ids=tuple(ci[0] for ci in cis),
            )
            out.append((device, [ci[1] for ci in cis]))
        return out, errors

    def _gi_profiles(self, gpu: Any) -> dict[int, tuple[int, int]]:
        """GPU-instance profile id -> (NVML profile index, memorySizeMB) for this GPU."""
        nv = self._nvml
        profiles: dict[int, tuple[int, int]] = {}
        for profile_index in range(int(getattr(nv, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0x12))):
            try:
                # version 1: the versioned call needs info.version set, which pynvml leaves 0
                info = nv.nvmlDeviceGetGpuInstanceProfileInfo(gpu, profile_index, 1)
            except (nv.NVMLError_NotSupported, nv.NVMLError_InvalidArgument):
                continue  # this GPU has no such profile
            except nv.NVMLError as error:
                raise BackendError("nvmlDeviceGetGpuInstanceProfileInfo", str(error),
                                   fatal=isinstance(error, nv.NVMLError_GpuIsLost)) from error
            profiles.setdefault(int(info.id), (profile_index, int(info.memorySizeMB)))
        return profiles

    def _handles_of(self, device: DeviceInfo) -> list[Any]:
        with self._lock:
            handles = self._handles.get(device.uuid)
        if handles is None:
            uuids = device.compute_instance_uuids or (device.uuid,)
            handles = [self._call("nvmlDeviceGetHandleByUUID", self._nvml.nvmlDeviceGetHandleByUUID, u)
                       for u in uuids]
        return handles

    def processes(self, device: DeviceInfo) -> list[int]:
        nv = self._nvml
        pids: set[int] = set()
        for handle in self._handles_of(device):  # every compute instance of a MIG GPU instance
            pids |= {p.pid for p in self._call("nvmlDeviceGetComputeRunningProcesses",
                                               nv.nvmlDeviceGetComputeRunningProcesses, handle)}
            try:
                pids |= {p.pid for p in nv.nvmlDeviceGetGraphicsRunningProcesses(handle)}
            except nv.NVMLError_NotSupported:
                pass  # MIG devices and compute-only boards have no graphics contexts
            except nv.NVMLError as error:
                raise BackendError("nvmlDeviceGetGraphicsRunningProcesses", str(error),
                                   fatal=isinstance(error, nv.NVMLError_GpuIsLost)) from error
        return sorted(pids)

    def memory(self, device: DeviceInfo) -> MemoryInfo:
        nv = self._nvml
        info = self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, self._handles_of(device)[0],
                          nv.nvmlMemory_v2)
        return MemoryInfo(int(info.total), int(info.reserved), int(info.free), int(info.used))

    def set_compute_mode(self, device: DeviceInfo, mode: ComputeMode) -> None:
        nv = self._nvml
        value = {
            ComputeMode.DEFAULT: nv.NVML_COMPUTEMODE_DEFAULT,
            ComputeMode.EXCLUSIVE_PROCESS: nv.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS,
            ComputeMode.PROHIBITED: nv.NVML_COMPUTEMODE_PROHIBITED,
        }[mode]
        handles = self._handles_of(device)
        for index, handle in enumerate(handles):  # compute mode is per compute instance on MIG (CUDA 13.3+)
            # Our worker opens the first CI; the others must not take a context meanwhile.
            mode_value = nv.NVML_COMPUTEMODE_PROHIBITED if index and mode is ComputeMode.EXCLUSIVE_PROCESS else value
            if not device.is_mig:
                self._call("nvmlDeviceSetComputeMode", nv.nvmlDeviceSetComputeMode, handle, mode_value)
                continue
            try:
                nv.nvmlDeviceSetComputeMode(handle, mode_value)
            except nv.NVMLError_NotSupported as error:
                if mode_value == nv.NVML_COMPUTEMODE_DEFAULT and self._mode(handle) == mode_value:
                    continue  # "compute mode would be set to DEFAULT": it is, nothing to change
                raise ComputeModeUnsupported("nvmlDeviceSetComputeMode", f"{error} on MIG device {device.name} "
                                             "(NVML before CUDA 13.3 cannot change compute mode on MIG)") from error
            except nv.NVMLError as error:
                raise BackendError("nvmlDeviceSetComputeMode", str(error),
                                   fatal=isinstance(error, nv.NVMLError_GpuIsLost)) from error
            if self._mode(handle) != mode_value:  # accepted but not applied: no guard
                raise ComputeModeUnsupported("nvmlDeviceGetComputeMode", f"MIG device {device.name} reads mode "
                                             f"{self._mode(handle)} after setting {mode_value}")

    def _mode(self, handle: Any) -> int | None:
        """``nvmlDeviceGetComputeMode``; None if NVML cannot say."""
        try:
            return int(self._nvml.nvmlDeviceGetComputeMode(handle))
        except self._nvml.NVMLError:
            return None

    def scrub_on_free_disabled(self) -> bool | None:
        return scrub_on_free_disabled()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
