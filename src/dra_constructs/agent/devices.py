"""Devices the agent sanitizes, and the names the NVIDIA DRA driver gives them.

A device is a whole GPU or a MIG GPU instance (the smallest unit whose memory can be scrubbed
on its own). Names follow the driver exactly (kubernetes-sigs/dra-driver-nvidia-gpu,
``cmd/gpu-kubelet-plugin/mig.go`` ``ToCanonicalName`` and go-nvlib ``MigProfileInfo.String``):

- whole GPU: ``gpu-<minor>``;
- MIG: ``gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart>``, where ``<profile>`` is the
  go-nvlib profile string (``1g.10gb``, ``1g.10gb+me``, ``1g.20gb+gfx``, ``1g.24gb-me``,
  ``1g.10gb+me.all``) with the dots removed and then every character outside ``[a-z0-9-.]``
  replaced by ``-`` and ``-`` trimmed at both ends: ``1g10gb``, ``1g10gb-me``, ``1g20gb-gfx``,
  ``1g24gb-me``, ``1g10gb-meall``.

The pool is the node name and the driver ``gpu.nvidia.com``. State is keyed on the name and
checked against the UUID: a UUID change (MIG reconfiguration) makes the device unknown.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from dra_constructs.catalog import DRIVER

__all__ = [
    "DRIVER",
    "DeviceInfo",
    "gi_profile_shape",
    "gpu_device_name",
    "mig_device_name",
    "mig_memory_gb",
    "mig_profile_name",
]

_NOT_RFC1123 = re.compile(r"[^a-z0-9-.]")

#: NVML_GPU_INSTANCE_PROFILE_* index -> (GPU-instance slices, attributes, negated attributes),
#: as go-nvlib's ``NewMigProfile`` maps them (nvml.h values).
_GI_PROFILES: dict[int, tuple[int, tuple[str, ...], tuple[str, ...]]] = {
    0x0: (1, (), ()), 0x1: (2, (), ()), 0x2: (3, (), ()), 0x3: (4, (), ()), 0x4: (7, (), ()),
    0x5: (8, (), ()), 0x6: (6, (), ()),
    0x7: (1, ("me",), ()), 0x8: (2, ("me",), ()),           # *_REV1: media extensions
    0x9: (1, (), ()),                                       # 1_SLICE_REV2 (1g.Ngb with 2 memory slices)
    0xA: (1, ("gfx",), ()), 0xB: (2, ("gfx",), ()), 0xC: (4, ("gfx",), ()),
    0xD: (1, (), ("me",)), 0xE: (2, (), ("me",)),           # *_NO_ME
    0xF: (1, ("me.all",), ()), 0x10: (2, ("me.all",), ()),  # *_ALL_ME
}


def gpu_device_name(minor: int) -> str:
    """DRA device name of a whole GPU."""
    return f"gpu-{minor}"


def _rfc1123(name: str) -> str:
    """The driver's ``toRFC1123Compliant``."""
    name = _NOT_RFC1123.sub("-", name.lower()).strip("-")
    return name.removesuffix(".")[:253]


def mig_device_name(minor: int, profile: str, profile_id: int, placement_start: int) -> str:
    """DRA device name of a MIG device, e.g. ``gpu-0-mig-1g10gb-19-0`` for ``1g.10gb``."""
    return f"gpu-{minor}-mig-{_rfc1123(profile.replace('.', ''))}-{profile_id}-{placement_start}"


def gi_profile_shape(profile_index: int) -> tuple[int, tuple[str, ...], tuple[str, ...]] | None:
    """(slices, attributes, negated attributes) of an NVML GPU-instance profile index; None if unknown."""
    return _GI_PROFILES.get(profile_index)


def mig_memory_gb(device_total_bytes: int, mig_memory_mb: int) -> int:
    """go-nvlib ``getMigMemorySizeGB``: the ``NNgb`` of a profile name (rounded to eighths of the GPU)."""
    fraction = math.ceil(mig_memory_mb * (1 << 20) / device_total_bytes * 8) / 8
    total_gb = (device_total_bytes + (1 << 30) - 1) // (1 << 30)
    return math.floor(fraction * total_gb + 0.5)  # Go's math.Round: halves away from zero


def mig_profile_name(profile_index: int, mig_memory_mb: int, device_total_bytes: int) -> str | None:
    """The profile name the driver advertises for a GPU instance (its compute instance spans the GI).

    None for a profile index go-nvlib does not know (the driver cannot name it either).
    """
    shape = gi_profile_shape(profile_index)
    if shape is None:
        return None
    slices, attributes, negated = shape
    suffix = ""
    if attributes:
        suffix = "+" + ",".join(attributes)
    if negated:
        suffix = "-" + ",".join(negated)
    return f"{slices}g.{mig_memory_gb(device_total_bytes, mig_memory_mb)}gb{suffix}"


@dataclass(frozen=True)
class DeviceInfo:
    """One sanitizable device as the NVML (or simulated) backend enumerates it.

    For a MIG GPU instance ``uuid`` is the MIG device UUID of its first compute instance (the
    one the CUDA worker opens) and ``compute_instance_uuids`` lists every compute instance's
    MIG UUID: they share the instance's memory, so all are drained and verified together.
    """

    name: str
    uuid: str
    minor: int
    memory_bytes: int
    parent_uuid: str | None = None
    mig_profile: str | None = None
    compute_instance_uuids: tuple[str, ...] = ()
    #: MIG placement on the parent (GI profile id, first memory slice, memory slices); None: not known.
    placement: tuple[int, int, int] | None = None
    #: DynamicMIG: the DRA driver creates the instance at prepare and destroys it at unprepare.
    dynamic: bool = False
    #: DynamicMIG: the whole GPU ``gpu-N`` the driver publishes beside the placements (Hopper and
    #: newer); ``placement`` then spans every memory slice (the full-size GPU-instance profile).
    whole_gpu: bool = False
    #: MIG: the GPU instance id and its compute instances' ids (the capability nodes of
    #: :mod:`.devhandles`); None / empty: not known (then only NVML's lists count).
    gpu_instance_id: int | None = None
    compute_instance_ids: tuple[int, ...] = ()

    @property
    def is_mig(self) -> bool:
        """True for a MIG device (its CUDA context must be created through its MIG UUID)."""
        return self.parent_uuid is not None

    @property
    def gpu_uuid(self) -> str:
        """The physical GPU's UUID (the parent of a MIG device, the device itself otherwise)."""
        return self.parent_uuid or self.uuid

    def overlaps(self, other: DeviceInfo) -> bool:
        """Same physical GPU and intersecting memory slices (placements of one partitionable GPU)."""
        if self.placement is None or other.placement is None or self.gpu_uuid != other.gpu_uuid:
            return False
        _, start, size = self.placement
        _, other_start, other_size = other.placement
        return start < other_start + other_size and other_start < start + size

    @property
    def cuda_visible_devices(self) -> str:
        """The ``CUDA_VISIBLE_DEVICES`` value that shows exactly this device to a CUDA process."""
        return self.uuid
