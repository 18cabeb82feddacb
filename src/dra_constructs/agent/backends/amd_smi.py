"""AMD SMI backend (the ``amdsmi`` Python package, AMD's ctypes wrapper of ``libamd_smi.so``; imported lazily).

The unit is what amd-smi lists as a processor: a whole GPU in SPX mode, or one compute partition
(DPX/QPX/CPX), each with its own DRM card and render node. Names follow the AMD GPU DRA driver,
``gpu-<cardIndex>-<renderIndex>`` (:mod:`dra_constructs.catalog.amd_devices`), from
``amdsmi_get_gpu_enumeration_info`` (``drm_card``, ``drm_render``; ROCm 6.4+). The package finds the
library through ``$ROCM_HOME``/``$ROCM_PATH`` ``/lib/libamd_smi.so``, then the dynamic loader
(``LD_LIBRARY_PATH``), then ``/opt/rocm/lib``.

There is no compute mode on AMD GPUs: nothing like NVML's PROHIBITED keeps a process from opening
``/dev/kfd`` and a render node it can reach. :meth:`AmdSmiDevices.set_compute_mode` accepts DEFAULT
(a no-op: it is the only mode) and raises :class:`ComputeModeUnsupported` for the others, so the
barrier records that no compute-mode guard exists: the guard is the device taint (no new claim is
allocated the device), and the process list is checked before the fill, right before it, and
after the verify, so a context that slips in is caught and the device is quarantined.

PIDs: amd-smi reads the KFD's per-process entries (``/sys/class/kfd/kfd/proc/<pid>``), which
are host PIDs; the agent runs with ``hostPID: true`` to signal them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from dra_constructs.agent.backends.base import (
    BackendError,
    ComputeMode,
    ComputeModeUnsupported,
    EnumerationError,
    EnumerationFailed,
    EnumerationResult,
    MemoryInfo,
)
from dra_constructs.agent.devices import DeviceInfo

__all__ = ["AmdFacts", "AmdSmiDevices", "amd_device_name", "not_supported"]

#: amdsmi.h amdsmi_status_t codes that mean the GPU or the driver is gone (quarantine at once).
_FATAL = {34, 54}  # AMDSMI_STATUS_DRIVER_NOT_LOADED, AMDSMI_STATUS_AMDGPU_RESTART_ERR
_NOT_SUPPORTED = 2  # AMDSMI_STATUS_NOT_SUPPORTED


def not_supported(error: BackendError) -> bool:
    """True if ``error`` is AMD SMI's ``AMDSMI_STATUS_NOT_SUPPORTED`` (the GPU or driver does not serve the read)."""
    return int(getattr(error.__cause__, "err_code", -1)) == _NOT_SUPPORTED


def amd_device_name(card: int, render: int) -> str:
    """The AMD GPU DRA driver's device name: ``gpu-<cardIndex>-<renderIndex>``."""
    return f"gpu-{card}-{render}"


@dataclass(frozen=True)
class AmdFacts:
    """What the HIP worker and the cleaner shader need to reach exactly this device."""

    bdf: int                        # amdsmi_bdf_t.as_uint of the GPU (its partitions share it)
    partition: int                  # amdsmi_kfd_info_t.current_partition_id: the XCP index
    hip_uuid: str                   # ROCr agent UUID ("GPU-<hex>"), for ROCR_VISIBLE_DEVICES
    hip_id: int | None              # HIP ordinal on this node (None: amd-smi could not say)
    card: int
    render: int
    compute_partition: str | None   # "SPX", "DPX", "QPX", "CPX" (None: not partitionable)
    memory_partition: str | None    # "NPS1", "NPS4", ...
    kfd_node: int | None = None     # amdsmi_kfd_info_t.node_id: its KFD topology node (None: not given)


class AmdSmiDevices:
    """NvmlBackend over AMD SMI; one ``amdsmi_init`` per agent, handles re-read at each enumeration."""

    def __init__(self) -> None:
        try:
            import amdsmi
        except (ImportError, OSError, KeyError) as error:  # KeyError: the wrapper found no libamd_smi.so
            raise BackendError("import amdsmi", f"the amdsmi package or libamd_smi.so is unavailable ({error}); "
                               "install the extra `amd` and run on a node with ROCm's amd-smi-lib", True) from error
        self._smi: Any = amdsmi
        self._lock = threading.Lock()
        self._handles: dict[str, Any] = {}
        self._facts: dict[str, AmdFacts] = {}
        self._call("amdsmi_init", amdsmi.amdsmi_init, amdsmi.AmdSmiInitFlags.INIT_AMD_GPUS)

    def _call(self, op: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self._smi.AmdSmiLibraryException as error:
            code = int(error.err_code)
            raise BackendError(op, f"{error.get_error_info()} (amdsmi status {code})", fatal=code in _FATAL) from error
        except self._smi.AmdSmiException as error:  # parameter errors: a bug on our side, named
            raise BackendError(op, f"{type(error).__name__}: {error}") from error

    def _optional(self, op: str, fn: Any, *args: Any) -> Any:
        """A read a GPU may not serve (``AMDSMI_STATUS_NOT_SUPPORTED``): None then."""
        try:
            return self._call(op, fn, *args)
        except BackendError as error:
            if not_supported(error):
                return None
            raise

    def enumerate(self) -> EnumerationResult:
        smi = self._smi
        handles = self._call("amdsmi_get_processor_handles", smi.amdsmi_get_processor_handles)
        found: list[DeviceInfo] = []
        errors: list[EnumerationError] = []
        by_uuid: dict[str, Any] = {}
        facts: dict[str, AmdFacts] = {}
        for index, handle in enumerate(handles):
            try:
                info = self._call("amdsmi_get_gpu_enumeration_info", smi.amdsmi_get_gpu_enumeration_info, handle)
                card, render = info["drm_card"], info["drm_render"]
                if not isinstance(card, int) or not isinstance(render, int):
                    raise BackendError("amdsmi_get_gpu_enumeration_info", f"no DRM card/render node ({card}, {render})")
                uuid = str(self._call("amdsmi_get_gpu_device_uuid", smi.amdsmi_get_gpu_device_uuid, handle))
                total = int(self._call("amdsmi_get_gpu_memory_total", smi.amdsmi_get_gpu_memory_total, handle,
                                       smi.AmdSmiMemoryType.VRAM))
                kfd = self._call("amdsmi_get_gpu_kfd_info", smi.amdsmi_get_gpu_kfd_info, handle)
                partition = kfd["current_partition_id"]
                bdf = self._call("amdsmi_get_gpu_device_bdf", smi.amdsmi_get_gpu_device_bdf, handle)
                compute = self._optional("amdsmi_get_gpu_compute_partition", smi.amdsmi_get_gpu_compute_partition,
                                         handle)
                memory = self._optional("amdsmi_get_gpu_memory_partition", smi.amdsmi_get_gpu_memory_partition,
                                        handle)
            except BackendError as error:
                # minor unknown: the failure may hide any device name, so every unmapped claim stays guarded
                errors.append(EnumerationError(index, error.op, str(error).partition(": ")[2] or str(error),
                                               error.fatal))
                continue
            name = amd_device_name(card, render)
            if uuid in by_uuid:  # facts are found by UUID: a second device would take the first one's
                first = next(d.name for d in found if d.uuid == uuid)
                errors.append(EnumerationError(
                    index, "amdsmi_get_gpu_device_uuid",
                    f"{name} reports the UUID {uuid} of {first} (compute partitions of one GPU did so before "
                    f"AMD SMI put the partition into the UUID, ROCm 7.12): not enumerated, its claims stay "
                    f"guarded; update ROCm"))
                continue
            device = DeviceInfo(name, uuid, card, total)
            found.append(device)
            by_uuid[uuid] = handle
            hip_id = info.get("hip_id")
            facts[uuid] = AmdFacts(
                bdf=_bdf_int(bdf), partition=int(partition) if isinstance(partition, int) else 0,
                hip_uuid=str(info.get("hip_uuid") or ""), hip_id=hip_id if isinstance(hip_id, int) else None,
                card=card, render=render, compute_partition=compute or None, memory_partition=memory or None,
                kfd_node=kfd.get("node_id") if isinstance(kfd.get("node_id"), int) else None)
        with self._lock:
            self._handles, self._facts = by_uuid, facts
        return EnumerationResult(found, errors)

    def devices(self) -> list[DeviceInfo]:
        result = self.enumerate()
        if result.errors:
            raise EnumerationFailed(result)
        return result.devices

    def facts(self, device: DeviceInfo) -> AmdFacts:
        """Where the device is (PCI address, partition index, HIP identity); enumerates if unknown."""
        with self._lock:
            known = self._facts.get(device.uuid)
        if known is None:
            self.enumerate()
            with self._lock:
                known = self._facts.get(device.uuid)
        if known is None:
            raise BackendError("amdsmi_get_processor_handles",
                               f"{device.name} ({device.uuid}) is not listed by amd-smi", fatal=True)
        if amd_device_name(known.card, known.render) != device.name:  # its UUID is another device's now
            raise BackendError("amdsmi_get_gpu_device_uuid",
                               f"{device.name}'s UUID {device.uuid} names "
                               f"{amd_device_name(known.card, known.render)} in AMD SMI's enumeration", fatal=True)
        return known

    def drm_minors(self, device: DeviceInfo) -> tuple[int, int]:
        """(card, render) minors of the device's DRM nodes (``drm_card``, ``drm_render`` of the enumeration)."""
        facts = self.facts(device)
        return facts.card, facts.render

    def kfd_node(self, device: DeviceInfo) -> int | None:
        """The device's KFD topology node (``amdsmi_get_gpu_kfd_info`` ``node_id``); None if AMD SMI gave none."""
        return self.facts(device).kfd_node

    def handle(self, device: DeviceInfo) -> Any:
        """The amd-smi processor handle of ``device``."""
        self.facts(device)
        with self._lock:
            return self._handles[device.uuid]

    def query(self, function: str, device: DeviceInfo) -> Any:
        """``amdsmi.<function>(handle of device)``; a :class:`BackendError` naming the call if it fails."""
        return self._call(function, getattr(self._smi, function), self.handle(device))

    def processes(self, device: DeviceInfo) -> list[int]:
        listed = self._call("amdsmi_get_gpu_process_list", self._smi.amdsmi_get_gpu_process_list, self.handle(device))
        return sorted({int(p["pid"]) for p in listed})

    def memory(self, device: DeviceInfo) -> MemoryInfo:
        smi = self._smi
        handle = self.handle(device)
        total = int(self._call("amdsmi_get_gpu_memory_total", smi.amdsmi_get_gpu_memory_total, handle,
                               smi.AmdSmiMemoryType.VRAM))
        used = int(self._call("amdsmi_get_gpu_memory_usage", smi.amdsmi_get_gpu_memory_usage, handle,
                              smi.AmdSmiMemoryType.VRAM))
        return MemoryInfo(total, 0, max(0, total - used), used)

    def set_compute_mode(self, device: DeviceInfo, mode: ComputeMode) -> None:
        if mode is ComputeMode.DEFAULT:
            return  # the only mode an AMD GPU has
        raise ComputeModeUnsupported("set_compute_mode", f"AMD GPUs have no compute modes ({mode.value} on "
                                     f"{device.name}): the device taint is the guard")

    def ras_enabled(self, device: DeviceInfo) -> bool | None:
        """True if ECC (RAS) is enabled on any block of the device's GPU; None if amd-smi cannot say."""
        try:
            blocks = self.query("amdsmi_get_gpu_ecc_enabled", device)
        except BackendError:
            return None
        return bool(blocks)

    def scrub_on_free_disabled(self) -> bool | None:
        """amdgpu wipes VRAM on release when RAS is enabled: True if any GPU has it off; None if unknown."""
        with self._lock:
            uuids = list(self._handles)
        if not uuids:
            try:
                devices = self.enumerate().devices
            except BackendError:
                return None
            uuids = [d.uuid for d in devices]
        states = []
        for uuid in uuids:
            states.append(self.ras_enabled(DeviceInfo(uuid, uuid, 0, 0)))
        if not states or any(s is None for s in states):
            return None
        return not all(states)

    def shut_down(self) -> None:
        """``amdsmi_shut_down`` (tests; the agent keeps its session for its lifetime)."""
        self._call("amdsmi_shut_down", self._smi.amdsmi_shut_down)


def _bdf_int(bdf: Any) -> int:
    """The wrapper formats the BDF as ``dddd:bb:dd.f``; back to ``amdsmi_bdf_t.as_uint``."""
    text = str(bdf)
    try:
        domain, bus, rest = text.split(":")
        device, function = rest.split(".")
        return (int(domain, 16) << 16) | (int(bus, 16) << 8) | (int(device, 16) << 3) | int(function, 16)
    except ValueError as error:
        raise BackendError("amdsmi_get_gpu_device_bdf", f"unexpected PCI address {text!r}") from error
