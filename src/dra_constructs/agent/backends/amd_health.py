"""Health reads and driver-state attestation of AMD devices over AMD SMI (:class:`..health.HealthSource`).

Served: ``ecc_mode`` (``amdsmi_get_gpu_ecc_enabled``: any RAS/ECC block enabled),
``ecc_volatile_uncorrected`` (``amdsmi_get_gpu_total_ecc_count`` uncorrectable, counted since the
driver loaded), ``driver_version`` (``amdsmi_get_gpu_driver_info``). The NVIDIA-only reads
(remapped rows, retired pages, the recovery action, XIDs, the CUDA driver version, persistence
mode, MIG mode, confidential computing) answer "unsupported": the gates record them as
unavailable, never as passed. :meth:`AmdHealth.isolation` is the process-isolation state for the
record: ``enforce_isolation`` as sysfs reads it now and the last cleaner-shader run on the device.
"""

from __future__ import annotations

from typing import Any

from dra_constructs.agent.backends.amd_hip import HipScrubber
from dra_constructs.agent.backends.amd_isolation import AmdIsolation, pci_address
from dra_constructs.agent.backends.amd_smi import AmdSmiDevices, not_supported
from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.health import Reading

__all__ = ["AmdHealth"]

_UNSUPPORTED = "not served by AMD SMI"


class AmdHealth:
    """HealthSource over :class:`.amd_smi.AmdSmiDevices`."""

    def __init__(self, smi: AmdSmiDevices, scrubber: HipScrubber | None = None) -> None:
        self.smi = smi
        self.scrubber = scrubber

    def _one(self, device: DeviceInfo, name: str) -> Reading:
        try:
            if name == "ecc_mode":
                return Reading(bool(self.smi.query("amdsmi_get_gpu_ecc_enabled", device)))
            if name == "ecc_volatile_uncorrected":
                return Reading(int(self.smi.query("amdsmi_get_gpu_total_ecc_count", device)["uncorrectable_count"]))
            if name == "driver_version":
                info = self.smi.query("amdsmi_get_gpu_driver_info", device)
                return Reading(f"{info['driver_name']} {info['driver_version']}")
        except BackendError as error:
            return Reading(error=str(error), unsupported=not_supported(error))
        return Reading(error=_UNSUPPORTED, unsupported=True)

    def read(self, device: DeviceInfo, names: tuple[str, ...]) -> dict[str, Reading]:
        return {name: self._one(device, name) for name in names}

    def isolation(self, device: DeviceInfo) -> dict[str, Any]:
        """``enforce_isolation`` of the device's partition now, and the last cleaner-shader run on it."""
        out: dict[str, Any] = {}
        try:
            facts = self.smi.facts(device)
            isolation = self.scrubber.isolation if self.scrubber is not None else AmdIsolation()
            path = isolation.root / "bus" / "pci" / "devices" / pci_address(facts.bdf) / "enforce_isolation"
            values = path.read_text(encoding="ascii").split()
            out.update(pci_address=pci_address(facts.bdf), partition=facts.partition,
                       compute_partition=facts.compute_partition, memory_partition=facts.memory_partition,
                       enforce_isolation=int(values[facts.partition]) if facts.partition < len(values) else None,
                       ras_enabled=self.smi.ras_enabled(device))
        except (BackendError, OSError, ValueError) as error:
            out["error"] = f"{type(error).__name__}: {error}"
        last = self.scrubber.cleaned.get(device.uuid) if self.scrubber is not None else None
        out["last_cleaner_shader"] = last.get("at") if last else None
        return out
