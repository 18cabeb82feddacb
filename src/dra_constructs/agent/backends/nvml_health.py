"""NVML answers for :mod:`..health`: the gates' reads and the attested driver state (pynvml).

Every read goes to the physical GPU (a MIG slice: its parent, by ``DeviceInfo.gpu_uuid``):
ECC, row remapping and the recovery action are GPU-wide in nvml.h, and the XID event set is
registered on the parent handles ("In MIG mode, if device handle is provided, the API reports
all the events for the available instances", ``nvmlEventSetWait_v2``). Signatures: go-nvml
pkg/nvml/nvml.h at 2f9e261 (``nvmlDeviceGetEccMode`` line 6907, ``nvmlDeviceGetTotalEccErrors``
7007, ``nvmlSystemGetConfComputeState`` 7906, ``nvmlDeviceGetRetiredPagesPendingStatus`` 8428,
``nvmlDeviceGetRemappedRows`` 8455, ``nvmlEventSetWait_v2`` 10000, ``nvmlDeviceGetFieldValues``
10251).

XID events: one event set for the agent's life, every GPU registered for
``nvmlEventTypeXidCriticalError`` when it is built; each read drains what is queued (a zero
timeout) into a per-GPU count. Events have no timestamp, so one queued before the claim began
but drained after its baseline counts against it (the safe direction).
"""

from __future__ import annotations

import threading
from typing import Any

from dra_constructs.agent.backends.nvml import NvmlDevices
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.health import Reading

__all__ = ["NvmlHealth"]

_RECOVERY_FIELD = 230  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (nvml.h line 2808; first in the CUDA 12.8 header)
_XID_CRITICAL = 0x8    # nvmlEventTypeXidCriticalError (nvml.h line 3186)


class NvmlHealth:
    """:class:`..health.HealthSource` over the agent's :class:`NvmlDevices` (same ``nvmlInit``)."""

    def __init__(self, devices: NvmlDevices) -> None:
        self._nv: Any = devices._nvml
        self._lock = threading.Lock()
        self._xids: dict[str, list[int]] = {}
        self._xid_error: dict[str, Reading] = {}  # GPUs whose registration failed: the read to answer
        self._events: Any = None
        self._events_error: str | None = None
        self._events_unsupported = False
        self._register_events()

    # --- plumbing ----------------------------------------------------------------------------

    def _unsupported(self, error: Exception) -> bool:
        nv = self._nv
        return isinstance(error, (nv.NVMLError_NotSupported, nv.NVMLError_FunctionNotFound))

    def _reading(self, fn: Any, *args: Any) -> Reading:
        try:
            return Reading(fn(*args))
        except self._nv.NVMLError as error:
            return Reading(error=f"{getattr(fn, '__name__', 'nvml')}: {error}", unsupported=self._unsupported(error))

    def _cuda_version(self) -> int:
        """``nvmlSystemGetCudaDriverVersion`` (e.g. 12080); 0 if NVML cannot say."""
        version = self._reading(self._nv.nvmlSystemGetCudaDriverVersion)
        return int(version.value) if version.ok else 0

    def _gpu(self, device: DeviceInfo) -> Any:
        return self._nv.nvmlDeviceGetHandleByUUID(device.gpu_uuid)

    def _register_events(self) -> None:
        nv = self._nv
        try:
            self._events = nv.nvmlEventSetCreate()
        except nv.NVMLError as error:
            self._events_error = f"nvmlEventSetCreate: {error}"
            self._events_unsupported = self._unsupported(error)
            return
        for index in range(nv.nvmlDeviceGetCount()):
            try:
                gpu = nv.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nv.nvmlDeviceGetUUID(gpu))
            except nv.NVMLError:
                continue  # enumeration reports this GPU; its xid read says unregistered
            try:
                nv.nvmlDeviceRegisterEvents(gpu, _XID_CRITICAL, self._events)
                self._xids[uuid] = []
            except nv.NVMLError as error:
                self._xid_error[uuid] = Reading(error=f"nvmlDeviceRegisterEvents: {error}",
                                                unsupported=self._unsupported(error))

    def _drain(self) -> str | None:
        """Move every queued XID event into its GPU's list; an error string if waiting failed."""
        nv = self._nv
        for _ in range(10_000):
            try:
                data = nv.nvmlEventSetWait_v2(self._events, 0)
            except nv.NVMLError_Timeout:
                return None
            except nv.NVMLError as error:
                return f"nvmlEventSetWait_v2: {error}"
            if int(data.eventType) & _XID_CRITICAL:
                try:
                    uuid = _text(nv.nvmlDeviceGetUUID(data.device))
                except nv.NVMLError:
                    uuid = "?"
                self._xids.setdefault(uuid, []).append(int(data.eventData))
        return "nvmlEventSetWait_v2: more than 10000 events queued"

    def _xid_count(self, device: DeviceInfo) -> Reading:
        with self._lock:
            if self._events is None:
                return Reading(error=self._events_error, unsupported=self._events_unsupported)
            problem = self._drain()
            if problem is not None:
                return Reading(error=problem)
            if device.gpu_uuid in self._xid_error:
                return self._xid_error[device.gpu_uuid]
            events = self._xids.get(device.gpu_uuid)
            if events is None:
                return Reading(error=f"GPU {device.gpu_uuid} was not registered for XID events")
            return Reading(len(events) + len(self._xids.get("?", [])))

    def _recovery_action(self, gpu: Any) -> Reading:
        nv = self._nv
        try:
            value = nv.nvmlDeviceGetFieldValues(gpu, [_RECOVERY_FIELD])[0]
        except nv.NVMLError as error:
            return Reading(error=f"nvmlDeviceGetFieldValues: {error}", unsupported=self._unsupported(error))
        if int(value.nvmlReturn) != 0:  # the per-field status
            status = nv.NVMLError(int(value.nvmlReturn))
            # An NVML older than the field (before the CUDA 12.8 one, R570) does not know its id: NOT_SUPPORTED,
            # or INVALID_ARGUMENT for an id past its NVML_FI_MAX. There both mean "not served"; elsewhere an error.
            unknown_id = isinstance(status, nv.NVMLError_InvalidArgument) and self._cuda_version() < 12080
            return Reading(error=f"NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: {status}",
                           unsupported=self._unsupported(status) or unknown_id)
        return Reading(int(value.value.uiVal))

    # --- HealthSource ------------------------------------------------------------------------

    def read(self, device: DeviceInfo, names: tuple[str, ...]) -> dict[str, Reading]:
        nv = self._nv
        try:
            gpu = self._gpu(device)
        except nv.NVMLError as error:
            failed = Reading(error=f"nvmlDeviceGetHandleByUUID({device.gpu_uuid}): {error}")
            return dict.fromkeys(names, failed)
        out: dict[str, Reading] = {}
        for name in names:
            out[name] = self._one(name, device, gpu)
        return out

    def _one(self, name: str, device: DeviceInfo, gpu: Any) -> Reading:
        nv = self._nv
        if name == "ecc_mode":
            mode = self._reading(nv.nvmlDeviceGetEccMode, gpu)
            return Reading(int(mode.value[0])) if mode.ok else mode
        if name == "ecc_volatile_uncorrected":
            return self._reading(nv.nvmlDeviceGetTotalEccErrors, gpu, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                 nv.NVML_VOLATILE_ECC)
        if name == "remapped_rows":
            rows = self._reading(nv.nvmlDeviceGetRemappedRows, gpu)
            return Reading(tuple(int(v) for v in rows.value)) if rows.ok else rows
        if name == "retired_pages_pending":
            return self._reading(nv.nvmlDeviceGetRetiredPagesPendingStatus, gpu)
        if name == "recovery_action":
            return self._recovery_action(gpu)
        if name == "xid_count":
            return self._xid_count(device)
        if name == "driver_version":
            version = self._reading(nv.nvmlSystemGetDriverVersion)
            return Reading(_text(version.value)) if version.ok else version
        if name == "cuda_driver_version":
            return self._reading(nv.nvmlSystemGetCudaDriverVersion)
        if name == "model":  # the residue canary's key (GPU model, driver version)
            model = self._reading(nv.nvmlDeviceGetName, gpu)
            return Reading(_text(model.value)) if model.ok else model
        if name == "persistence_mode":
            return self._reading(nv.nvmlDeviceGetPersistenceMode, gpu)
        if name == "mig_mode":
            mode = self._reading(nv.nvmlDeviceGetMigMode, gpu)
            return Reading(int(mode.value[0])) if mode.ok else mode
        if name == "conf_compute":
            state = self._reading(nv.nvmlSystemGetConfComputeState)
            if not state.ok:
                return state
            return Reading({"environment": int(state.value.environment), "cc_feature": int(state.value.ccFeature),
                            "dev_tools_mode": int(state.value.devToolsMode)})
        return Reading(error=f"unknown health read {name!r}")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
