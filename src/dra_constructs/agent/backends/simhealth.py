"""The simulated node's health reads (:mod:`..health`), answered as nvml.h documents them.

Per physical GPU (a MIG slice reads its parent): ECC mode and the volatile uncorrected count,
row remapping (NOT_SUPPORTED pre-Ampere and, nvml.h ``nvmlDeviceGetRemappedRows``: "On
MIG-enabled GPUs with active instances, querying the number of remapped rows is not
supported"), page retirement, the recovery-action field (NOT_SUPPORTED before the CUDA 12.8
NVML, R570) and critical XIDs. Tests inject faults by changing a :class:`SimGpuHealth` while
a claim holds the device (``node.health.gpu(uuid).ecc_volatile_uncorrected += 1``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.health import Reading

__all__ = ["SimGpuHealth", "SimHealth"]

_NOT_SUPPORTED = "Not Supported"


@dataclass
class SimGpuHealth:
    """One GPU's health as NVML would report it; ``errors``: read name -> an NVML error it returns."""

    ecc_supported: bool = True
    ecc_enabled: bool = True
    ecc_volatile_uncorrected: int = 0
    ampere_or_newer: bool = True       # row remapping (else: page retirement)
    remap_pending: bool = False
    remap_failure: bool = False
    retired_pages_pending: bool = False
    recovery_action: int = 0           # nvmlGpuRecoveryAction_t
    xids: list[int] = field(default_factory=list)
    persistence_mode: bool = True
    errors: dict[str, str] = field(default_factory=dict)


class SimHealth:
    """:class:`..health.HealthSource` of a :class:`.simulated.SimulatedNode`."""

    def __init__(self, driver_version: str = "570.124.06", cuda_driver_version: int = 12080,
                 conf_compute: dict[str, int] | None = None) -> None:
        self.driver_version = driver_version
        self.model = "Simulated GPU"  # nvmlDeviceGetName
        self.cuda_driver_version = cuda_driver_version
        self.conf_compute = conf_compute or {"environment": 0, "cc_feature": 0, "dev_tools_mode": 0}
        self._gpus: dict[str, SimGpuHealth] = {}
        self._lock = threading.Lock()

    def gpu(self, uuid: str) -> SimGpuHealth:
        """The health of the GPU ``uuid`` (a device's ``gpu_uuid``), created healthy on first use."""
        with self._lock:
            return self._gpus.setdefault(uuid, SimGpuHealth())

    def read(self, device: DeviceInfo, names: tuple[str, ...]) -> dict[str, Reading]:
        gpu = self.gpu(device.gpu_uuid)
        return {name: self._one(name, gpu, device.is_mig) for name in names}

    def _one(self, name: str, gpu: SimGpuHealth, mig: bool) -> Reading:
        if name in gpu.errors:
            return Reading(error=gpu.errors[name], unsupported=gpu.errors[name] == _NOT_SUPPORTED)
        unsupported = Reading(error=_NOT_SUPPORTED, unsupported=True)
        if name == "ecc_mode":
            return Reading(int(gpu.ecc_enabled)) if gpu.ecc_supported else unsupported
        if name == "ecc_volatile_uncorrected":
            return Reading(gpu.ecc_volatile_uncorrected) if gpu.ecc_supported and gpu.ecc_enabled else unsupported
        if name == "remapped_rows":
            if not gpu.ampere_or_newer or mig:
                return unsupported
            return Reading((0, int(gpu.remap_pending or gpu.remap_failure), int(gpu.remap_pending),
                            int(gpu.remap_failure)))
        if name == "retired_pages_pending":
            return Reading(int(gpu.retired_pages_pending))
        if name == "recovery_action":
            return Reading(gpu.recovery_action) if self.cuda_driver_version >= 12080 else unsupported
        if name == "xid_count":
            return Reading(len(gpu.xids))
        if name == "driver_version":
            return Reading(self.driver_version)
        if name == "model":
            return Reading(self.model)
        if name == "cuda_driver_version":
            return Reading(self.cuda_driver_version)
        if name == "persistence_mode":
            return Reading(int(gpu.persistence_mode))
        if name == "mig_mode":
            return Reading(int(mig))
        if name == "conf_compute":
            return Reading(dict(self.conf_compute))
        return Reading(error=f"unknown health read {name!r}")
