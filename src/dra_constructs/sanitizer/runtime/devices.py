"""Devices the agent sanitizes, and the names the NVIDIA DRA driver gives them.

A device is a whole GPU or a MIG GPU instance (the smallest unit whose memory can be scrubbed
on its own). Names follow the driver (reference gpu-sanitization.md section 5.1):
``gpu-<minor>`` and ``gpu-<minor>-mig-<profile w/o dots>-<profileId>-<placementStart>``; the
pool is the node name and the driver ``gpu.nvidia.com``. State is keyed on the name and
checked against the UUID: a UUID change (MIG reconfiguration) makes the device unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...catalog import DRIVER

__all__ = ["DRIVER", "DeviceInfo", "gpu_device_name", "mig_device_name"]

_NOT_NAME = re.compile(r"[^a-z0-9]")


def gpu_device_name(minor: int) -> str:
    """DRA device name of a whole GPU."""
    return f"gpu-{minor}"


def mig_device_name(minor: int, profile: str, profile_id: int, placement_start: int) -> str:
    """DRA device name of a MIG device, e.g. ``gpu-0-mig-1g10gb-19-0`` for ``1g.10gb``."""
    return f"gpu-{minor}-mig-{_NOT_NAME.sub('', profile.lower())}-{profile_id}-{placement_start}"


@dataclass(frozen=True)
class DeviceInfo:
    """One sanitizable device as the NVML (or simulated) backend enumerates it."""

    name: str
    uuid: str
    minor: int
    memory_bytes: int
    parent_uuid: str | None = None
    mig_profile: str | None = None
    #: MIG placement on the parent (GI profile id, first memory slice, memory slices); None: not known.
    placement: tuple[int, int, int] | None = None
    #: DynamicMIG: the DRA driver creates the instance at prepare and destroys it at unprepare.
    dynamic: bool = False

    @property
    def is_mig(self) -> bool:
        """True for a MIG device (its CUDA context must be created through its MIG UUID)."""
        return self.parent_uuid is not None

    def overlaps(self, other: DeviceInfo) -> bool:
        """Same parent GPU and intersecting memory slices (placements of one partitionable GPU)."""
        if self.placement is None or other.placement is None or self.parent_uuid != other.parent_uuid:
            return False
        _, start, size = self.placement
        _, other_start, other_size = other.placement
        return start < other_start + other_size and other_start < start + size

    @property
    def cuda_visible_devices(self) -> str:
        """The ``CUDA_VISIBLE_DEVICES`` value that shows exactly this device to a CUDA process."""
        return self.uuid
