"""NVML backend (``pynvml`` from NVIDIA's ``nvidia-ml-py``; imported lazily).

Facts (reference gpu-sanitization.md section 1): PIDs come back in the caller's PID namespace
and invisible ones are silently dropped, so the agent needs ``hostPID: true``
(:func:`host_pid_namespace` checks it); MIG devices are queried through their MIG handles;
``nvmlDeviceSetComputeMode`` works on MIG handles and resets to DEFAULT on reboot.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..devices import DeviceInfo, gpu_device_name, mig_device_name
from .base import BackendError, ComputeMode

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


def host_pid_namespace(proc: Path = Path("/proc")) -> bool:
    """True if we see the host's PID namespace (PID 2 is the kernel's ``kthreadd``)."""
    try:
        return (proc / "2" / "comm").read_text().strip() == "kthreadd"
    except OSError:
        return False


class NvmlDevices:
    """NvmlBackend over real NVML; one ``nvmlInit`` per agent, handles re-looked-up by UUID."""

    def __init__(self) -> None:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError as error:
            raise BackendError("import pynvml", "nvidia-ml-py is not installed (extra `gpu`)", True) from error
        self._nvml: Any = pynvml
        self._lock = threading.Lock()
        self._handles: dict[str, Any] = {}
        self._call("nvmlInit", pynvml.nvmlInit)

    def _call(self, op: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._nvml.NVMLError as error:
            lost = isinstance(error, getattr(self._nvml, "NVMLError_GpuIsLost", ()))
            raise BackendError(op, str(error), fatal=lost) from error

    def devices(self) -> list[DeviceInfo]:
        nv = self._nvml
        found: list[DeviceInfo] = []
        handles: dict[str, Any] = {}
        for index in range(self._call("nvmlDeviceGetCount", nv.nvmlDeviceGetCount)):
            gpu = self._call("nvmlDeviceGetHandleByIndex", nv.nvmlDeviceGetHandleByIndex, index)
            minor = int(self._call("nvmlDeviceGetMinorNumber", nv.nvmlDeviceGetMinorNumber, gpu))
            gpu_uuid = _text(self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, gpu))
            try:
                mig_on = self._call("nvmlDeviceGetMigMode", nv.nvmlDeviceGetMigMode, gpu)[0] == 1
            except BackendError:
                mig_on = False  # NOT_SUPPORTED: no MIG on this GPU
            if not mig_on:
                memory = self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, gpu)
                found.append(DeviceInfo(gpu_device_name(minor), gpu_uuid, minor, int(memory.total)))
                handles[gpu_uuid] = gpu
                continue
            seen_gi: set[int] = set()
            for mig_index in range(self._call("nvmlDeviceGetMaxMigDeviceCount",
                                              nv.nvmlDeviceGetMaxMigDeviceCount, gpu)):
                try:
                    mig = nv.nvmlDeviceGetMigDeviceHandleByIndex(gpu, mig_index)
                except nv.NVMLError:
                    continue  # NOT_FOUND: no MIG device at this index
                gi_id = int(self._call("nvmlDeviceGetGpuInstanceId", nv.nvmlDeviceGetGpuInstanceId, mig))
                if gi_id in seen_gi:
                    continue  # a second compute instance of the same GI shares its memory: one unit
                seen_gi.add(gi_id)
                gi = self._call("nvmlDeviceGetGpuInstanceById", nv.nvmlDeviceGetGpuInstanceById, gpu, gi_id)
                info = self._call("nvmlGpuInstanceGetInfo", nv.nvmlGpuInstanceGetInfo, gi)
                name = _text(self._call("nvmlDeviceGetName", nv.nvmlDeviceGetName, mig))
                profile = name.rsplit(" ", 1)[-1]  # "NVIDIA A100-SXM4-80GB MIG 1g.10gb" -> "1g.10gb"
                uuid = _text(self._call("nvmlDeviceGetUUID", nv.nvmlDeviceGetUUID, mig))
                memory = self._call("nvmlDeviceGetMemoryInfo", nv.nvmlDeviceGetMemoryInfo, mig)
                found.append(DeviceInfo(
                    mig_device_name(minor, profile, int(info.profileId), int(info.placement.start)),
                    uuid, minor, int(memory.total), parent_uuid=gpu_uuid, mig_profile=profile,
                ))
                handles[uuid] = mig
        with self._lock:
            self._handles = handles
        return found

    def _handle(self, device: DeviceInfo) -> Any:
        with self._lock:
            handle = self._handles.get(device.uuid)
        if handle is None:
            handle = self._call("nvmlDeviceGetHandleByUUID", self._nvml.nvmlDeviceGetHandleByUUID, device.uuid)
        return handle

    def processes(self, device: DeviceInfo) -> list[int]:
        nv = self._nvml
        handle = self._handle(device)
        pids = {p.pid for p in self._call("nvmlDeviceGetComputeRunningProcesses",
                                          nv.nvmlDeviceGetComputeRunningProcesses, handle)}
        try:
            pids |= {p.pid for p in nv.nvmlDeviceGetGraphicsRunningProcesses(handle)}
        except nv.NVMLError_NotSupported:
            pass  # MIG devices and compute-only boards have no graphics contexts
        except nv.NVMLError as error:
            raise BackendError("nvmlDeviceGetGraphicsRunningProcesses", str(error)) from error
        return sorted(pids)

    def set_compute_mode(self, device: DeviceInfo, mode: ComputeMode) -> None:
        nv = self._nvml
        value = {
            ComputeMode.DEFAULT: nv.NVML_COMPUTEMODE_DEFAULT,
            ComputeMode.EXCLUSIVE_PROCESS: nv.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS,
            ComputeMode.PROHIBITED: nv.NVML_COMPUTEMODE_PROHIBITED,
        }[mode]
        self._call("nvmlDeviceSetComputeMode", nv.nvmlDeviceSetComputeMode, self._handle(device), value)

    def scrub_on_free_disabled(self) -> bool | None:
        return scrub_on_free_disabled()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
