"""The interfaces the barrier talks to; one real and one simulated implementation each."""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from ..devices import DeviceInfo

__all__ = [
    "BackendError",
    "ComputeMode",
    "FillResult",
    "MemoryScrubber",
    "NvmlBackend",
    "OsSignaller",
    "PartitionBackend",
    "ProcessSignaller",
    "ScrubSession",
    "VerifyResult",
]


class BackendError(Exception):
    """A hardware call failed. ``fatal``: the device is gone or broken (quarantine at once)."""

    def __init__(self, op: str, message: str, fatal: bool = False) -> None:
        self.op = op
        self.fatal = fatal
        super().__init__(f"{op}: {message}")


class ComputeMode(StrEnum):
    """NVML compute modes the agent uses (values are NVML's)."""

    DEFAULT = "default"                    # NVML_COMPUTEMODE_DEFAULT = 0
    EXCLUSIVE_PROCESS = "exclusive-process"  # = 3: one context, ours, while we scrub
    PROHIBITED = "prohibited"              # = 2: no new contexts (between tenants, quarantine)


class NvmlBackend(Protocol):
    """Device inventory, the processes holding contexts, and compute mode (NVML's job)."""

    def devices(self) -> list[DeviceInfo]:
        """Every sanitizable device on the node (whole GPUs, or MIG GPU instances)."""

    def processes(self, device: DeviceInfo) -> list[int]:
        """PIDs (host namespace) holding compute or graphics contexts on the device."""

    def set_compute_mode(self, device: DeviceInfo, mode: ComputeMode) -> None:
        """Set the device's compute mode (MIG: on the MIG device handle)."""

    def scrub_on_free_disabled(self) -> bool | None:
        """True if the driver's scrub-on-free is off on this node; None if unknown."""


class ProcessSignaller(Protocol):
    """Sends signals to host PIDs."""

    def signal(self, pid: int, signum: int) -> bool:
        """Send ``signum``; False if the process no longer exists."""


class OsSignaller:
    """``os.kill`` in the host PID namespace (the agent runs with ``hostPID: true``)."""

    def signal(self, pid: int, signum: int) -> bool:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return False
        return True


@dataclass(frozen=True)
class FillResult:
    """What one zero-fill covered. ``bytes_free`` is ``cuMemGetInfo`` free after our context."""

    bytes_total: int
    bytes_free: int
    bytes_zeroed: int
    seconds: float


@dataclass(frozen=True)
class VerifyResult:
    """Device-side read-back of the filled memory: non-zero 8-byte words found."""

    bytes_verified: int
    nonzero_words: int
    seconds: float


class ScrubSession(Protocol):
    """One context on exactly one device (whole GPU or MIG slice), owned by process ``pid``."""

    @property
    def pid(self) -> int:
        """Host PID of the process that holds the context (it will show up in NVML)."""

    def fill(self) -> FillResult:
        """Allocate nearly all free memory and set it to zero (allocations are kept)."""

    def verify(self) -> VerifyResult:
        """Check on the device that every filled byte is zero."""

    def close(self) -> None:
        """Free everything and destroy the context (idempotent)."""


class MemoryScrubber(Protocol):
    """Opens scrub sessions (CUDA, or the simulated GPU)."""

    def open(self, device: DeviceInfo, timeout_s: float) -> ScrubSession:
        """Create the context; raises :class:`BackendError` if it cannot."""


class PartitionBackend(Protocol):
    """MIG partitions the agent creates and destroys itself (cold reset, DynamicMIG), and GPU reset.

    Errors are :class:`BackendError` whose message names the NVML code (``IN_USE``,
    ``INSUFFICIENT_RESOURCES``, ...). Implementations: :mod:`.partitions` (NVML) and the
    simulated node.
    """

    def instance(self, device: DeviceInfo) -> DeviceInfo | None:
        """The MIG instance now at the device's placement (its real UUID), or None if there is none."""

    def create(self, device: DeviceInfo) -> DeviceInfo:
        """Create the GPU instance (and its compute instances) at the device's placement; the new info."""

    def destroy(self, device: DeviceInfo) -> None:
        """Destroy every compute instance and the GPU instance at the device's placement."""

    def reset_gpu(self, device: DeviceInfo, timeout_s: float) -> DeviceInfo:
        """Reset the whole GPU of a non-MIG device; the (re-read) info."""
