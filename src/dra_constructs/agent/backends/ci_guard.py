"""The compute-instance guard over NVML: a static MIG slice with no compute instance takes no context.

Where NVML cannot set compute mode on MIG (every nvml.h before CUDA 13.3), this is the local
guard of a slice: ``nvmlComputeInstanceDestroy`` on every compute instance (CI) of its GPU
instance (GI) leaves no MIG device, so no process can create a CUDA context on its memory;
NVML answers ``IN_USE`` while a process holds a context there (nvml.h CUDA 13.2.1, line 13055:
"NVML_ERROR_IN_USE If the compute instance is in use. This error would be returned if processes
(e.g. CUDA application) are active on the compute instance.").
``nvmlGpuInstanceCreateComputeInstanceWithPlacement`` recreates them; the new CIs get new MIG UUIDs
(the stand-in models this; the NVIDIA DRA driver publishes a static MIG device's UUID, so it must
re-enumerate, see docs/sanitizer-runtime.md). Both need the MIG
``config`` capability, as the partition reset does.
"""

from __future__ import annotations

import ctypes
from typing import Any

from dra_constructs.agent.backends.base import BackendError, CiLayout
from dra_constructs.agent.backends.partitions import NvmlPartitions, compute_instances
from dra_constructs.agent.devices import DeviceInfo

__all__ = ["NvmlComputeInstances"]


class NvmlComputeInstances:
    """:class:`~.base.ComputeInstanceGuard` over the GI lookups of :class:`~.partitions.NvmlPartitions`."""

    def __init__(self, partitions: NvmlPartitions) -> None:
        self._parts = partitions
        self._nv: Any = partitions._nv

    def _gi(self, device: DeviceInfo) -> Any:
        gi = self._parts._gi(device)
        if gi is None:
            raise BackendError("nvmlDeviceGetGpuInstances", f"no GPU instance at the placement of {device.name}")
        return gi

    def _cis(self, gi: Any) -> list[tuple[int, Any]]:
        """(CI profile id, handle) of every compute instance of ``gi``."""
        return compute_instances(self._nv, gi)

    def close(self, device: DeviceInfo) -> CiLayout:
        nv = self._nv
        layout: CiLayout = []
        for profile_id, ci in self._cis(self._gi(device)):
            info = self._parts._call("nvmlComputeInstanceGetInfo", nv.nvmlComputeInstanceGetInfo, ci)
            layout.append((profile_id, int(info.placement.start), int(info.placement.size)))
        for _, ci in self._cis(self._gi(device)):  # all or none listed first: a refusal names the CI in use
            self._parts._call("nvmlComputeInstanceDestroy", nv.nvmlComputeInstanceDestroy, ci)
        return layout

    def reopen(self, device: DeviceInfo, layout: CiLayout | None) -> DeviceInfo:
        nv = self._nv
        gi = self._gi(device)
        if not self._cis(gi):
            if layout:
                for profile_id, start, size in layout:
                    where = nv.c_nvmlComputeInstancePlacement_t(start, size)
                    self._parts._call("nvmlGpuInstanceCreateComputeInstanceWithPlacement",
                                      nv.nvmlGpuInstanceCreateComputeInstanceWithPlacement, gi, profile_id,
                                      ctypes.byref(where))
            else:  # layout unknown (cut off before it was saved): one CI over the whole GI
                self._parts._call("nvmlGpuInstanceCreateComputeInstance", nv.nvmlGpuInstanceCreateComputeInstance,
                                  gi, self._full_profile(gi))
        found = self._parts.instance(device)
        if found is None:
            raise BackendError("nvmlGpuInstanceCreateComputeInstance", "created, but no MIG device appeared")
        return found

    def _full_profile(self, gi: Any) -> int:
        """The CI profile id spanning the whole GI (the largest slice count it offers)."""
        nv = self._nv
        best: tuple[int, int] | None = None
        for ci_profile in range(nv.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            try:
                info = nv.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, ci_profile, nv.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            except nv.NVMLError:
                continue
            if best is None or int(info.sliceCount) > best[0]:
                best = (int(info.sliceCount), int(info.id))
        if best is None:
            raise BackendError("nvmlGpuInstanceGetComputeInstanceProfileInfo", "no compute-instance profile")
        return best[1]
