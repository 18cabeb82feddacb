"""AMD Instinct GPUs, their partition profiles and the names the AMD GPU DRA driver publishes.

Pure Python, like the NVIDIA catalog. Sources:

- Driver: ROCm/k8s-gpu-dra-driver at commit 2622427 (2025-10-06, the newest snapshot we could
  read; no release tag yet). ``cmd/gpu-kubeletplugin/deviceinfo.go`` ``GetDevice`` (attributes,
  capacities), ``types.go`` (``amdgpu`` / ``amdgpu-partition``), ``discovery.go``
  ``enumerateAllPossibleDevices`` (a GPU in SPX is a whole ``amdgpu`` device, in any other compute
  mode it is published only as its partitions), ``pkg/amdgpu/amdgpu.go`` ``GetAMDGPUs`` (``deviceID``
  is the KFD topology ``unique_id``, shared by a GPU and its partitions), the Helm chart's
  ``templates/deviceclass.yaml`` (one class ``gpu.amd.com``: ``device.driver == 'gpu.amd.com'``) and
  ``docs/demo.md`` (a published MI300X: ``productName`` ``AMD_Instinct_MI300X_OAM``, ``family`` ``AI``,
  ``memory`` ``196592Mi``, ``computeUnits`` 304, ``simdUnits`` 1216).
- Careful: the driver's ``docs/driver-attributes.md`` and its example
  ``example-partitions-same-parent.yaml`` say partitions carry ``deviceID``; the code publishes
  ``parentDeviceID`` and ``parentPciAddr`` on partitions instead (``deviceID``/``pciAddr`` only on
  whole GPUs). We follow the code: ``matchAttribute: gpu.amd.com/deviceID`` over partitions fits no node.
- The driver publishes no ``resource.kubernetes.io/numaNode`` (it reads ``numa_node`` but does not
  publish it); ``resource.kubernetes.io/pcieRoot`` comes from ``deviceattribute`` when derivable.
- Valid (compute mode, NPS mode) pairs: Linux ``drivers/gpu/drm/amd/amdgpu/aqua_vanjaram.c``
  ``__aqua_vanjaram_is_valid_mode`` (SPX needs NPS1; DPX at most 2 memory partitions; TPX needs XCCs
  divisible by 3; QPX needs 2+ XCCs per partition and NPS1/NPS4; CPX needs NPS1/NPS4 dividing the XCCs).
- Memory of a partition: ``amdgpu_amdkfd_xcp_memory_size`` (the memory partition divided by the
  partitions sharing it: total / partitions in every valid mode), what KFD reports and the driver
  publishes. CUs and SIMDs split evenly over the XCCs (38 CUs per XCD on MI300, 32 on MI350; 4 SIMDs per CU).
"""

from __future__ import annotations

import difflib

from pydantic import BaseModel, ConfigDict, Field

from dra_constructs.catalog.amd_driver import (
    AMD_DEVICE_CLASS,
    AMD_DEVICE_CLASS_SELECTOR,
    AMD_DRIVER,
    AMD_DRIVER_SNAPSHOT,
    AMD_GPU_ATTRIBUTES,
    AMD_PARTITION_ATTRIBUTES,
    AMD_TYPE_GPU,
    AMD_TYPE_PARTITION,
)
from dra_constructs.errors import DraConstructsError

__all__ = [
    "AMD_DEVICE_CLASS",
    "AMD_DEVICE_CLASS_SELECTOR",
    "AMD_DRIVER",
    "AMD_DRIVER_SNAPSHOT",
    "AMD_GPU_ATTRIBUTES",
    "AMD_GPU_SPECS",
    "AMD_PARTITION_ATTRIBUTES",
    "AMD_TYPE_GPU",
    "AMD_TYPE_PARTITION",
    "AmdGpuSpec",
    "AmdPartitionProfile",
    "amd_gpu_spec",
    "amd_partition_profile",
]

#: Partitions per GPU by compute mode, as a divisor of the XCC count (CPX: one XCC each).
_XCCS_PER_PARTITION_DIVISOR = {"spx": 1, "dpx": 2, "tpx": 3, "qpx": 4}
_NPS = {"nps1": 1, "nps2": 2, "nps4": 4}
_SIMDS_PER_CU = 4
_PAGE = 4096


def _partitions(compute: str, xccs: int) -> int:
    return xccs if compute == "cpx" else _XCCS_PER_PARTITION_DIVISOR[compute]


def valid_mode(compute: str, memory: str, xccs: int) -> bool:
    """``__aqua_vanjaram_is_valid_mode`` for ``xccs`` XCCs (kernel with the 2024-11 DPX fix)."""
    nps = _NPS[memory]
    if compute == "spx":
        return nps == 1
    if compute == "dpx":
        return nps <= 2 and xccs % 4 == 0
    if compute == "tpx":
        return nps in (1, 3) and xccs % 3 == 0
    if compute == "qpx":
        return nps in (1, 4) and xccs // 4 >= 2
    if compute == "cpx":
        return xccs > 1 and nps in (1, 4) and xccs % nps == 0
    return False


class AmdPartitionProfile(BaseModel):
    """One ``partitionProfile`` of one GPU model, e.g. ``cpx_nps4`` on an MI300X (8 partitions)."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="As the driver's `partitionProfile` attribute spells it: `cpx_nps4`.")
    compute_mode: str
    memory_mode: str
    max_count: int = Field(gt=0, description="Partitions of one GPU in this mode (1 for SPX: a whole GPU).")
    compute_units: int = Field(gt=0)
    simd_units: int = Field(gt=0)
    memory_bytes: int = Field(gt=0, description="KFD's size for one partition (total / partitions, page-aligned).")

    @property
    def whole_gpu(self) -> bool:
        """SPX: the driver publishes the GPU as one ``amdgpu`` device, not as a partition."""
        return self.compute_mode == "spx"


class AmdGpuSpec(BaseModel):
    """An AMD Instinct GPU as the AMD DRA driver publishes it, with its valid partition profiles."""

    model_config = ConfigDict(frozen=True)

    key: str
    product_name: str = Field(description="sysfs product_name with spaces as `_` and no parentheses.")
    family: str = Field(description="`family` attribute (AMDGPU_FAMILY_* name): `AI` for CDNA 3/4.")
    xccs: int = Field(gt=0, description="Accelerator complex dies (XCDs).")
    compute_units: int = Field(gt=0)
    memory_bytes: int = Field(gt=0, description="KFD VRAM of the whole GPU (the `memory` capacity).")
    source: str = Field(description="Where the numbers come from ([SRC]/[3P]/[INFER]).")
    compute_modes: tuple[str, ...]
    memory_modes: tuple[str, ...]

    @property
    def simd_units(self) -> int:
        return self.compute_units * _SIMDS_PER_CU

    @property
    def profiles(self) -> tuple[AmdPartitionProfile, ...]:
        """Every valid profile, SPX first."""
        out = []
        for compute in self.compute_modes:
            for memory in self.memory_modes:
                if not valid_mode(compute, memory, self.xccs):
                    continue
                count = _partitions(compute, self.xccs)
                out.append(AmdPartitionProfile(
                    name=f"{compute}_{memory}", compute_mode=compute, memory_mode=memory, max_count=count,
                    compute_units=self.compute_units // count, simd_units=self.simd_units // count,
                    memory_bytes=self.memory_bytes // count // _PAGE * _PAGE,
                ))
        return tuple(out)

    @property
    def profiles_by_name(self) -> dict[str, AmdPartitionProfile]:
        return {p.name: p for p in self.profiles}


_MIB = 1024 * 1024
_CDNA3 = ("spx", "dpx", "qpx", "cpx")

AMD_GPU_SPECS: tuple[AmdGpuSpec, ...] = (
    AmdGpuSpec(key="MI300X", product_name="AMD_Instinct_MI300X_OAM", family="AI", xccs=8, compute_units=304,
               memory_bytes=196592 * _MIB, source="[SRC] the driver's docs/demo.md ResourceSlice",
               compute_modes=_CDNA3, memory_modes=("nps1", "nps4")),
    AmdGpuSpec(key="MI325X", product_name="AMD_Instinct_MI325X_OAM", family="AI", xccs=8, compute_units=304,
               memory_bytes=262128 * _MIB, source="[INFER] 256 GiB HBM3E less 16 MiB, as on MI300X",
               compute_modes=_CDNA3, memory_modes=("nps1", "nps4")),
    # MI350 series also offer NPS2; the kernel rule we read admits only DPX with it, and we have no
    # published slice of it, so NPS2 is left out rather than guessed.
    AmdGpuSpec(key="MI350X", product_name="AMD_Instinct_MI350X_OAM", family="AI", xccs=8, compute_units=256,
               memory_bytes=294896 * _MIB, source="[INFER] 288 GiB HBM3E less 16 MiB; 32 CUs per XCD",
               compute_modes=_CDNA3, memory_modes=("nps1",)),
    AmdGpuSpec(key="MI355X", product_name="AMD_Instinct_MI355X_OAM", family="AI", xccs=8, compute_units=256,
               memory_bytes=294896 * _MIB, source="[INFER] 288 GiB HBM3E less 16 MiB; 32 CUs per XCD",
               compute_modes=_CDNA3, memory_modes=("nps1",)),
    # An APU: 6 XCDs, so TPX instead of DPX/QPX; KFD reports half the system memory per socket in
    # NPS1 (amdgpu_amdkfd_xcp_memory_size, ttm_pages_limit), here a 4-socket node with 128 GiB each.
    AmdGpuSpec(key="MI300A", product_name="AMD_Instinct_MI300A", family="AI", xccs=6, compute_units=228,
               memory_bytes=65536 * _MIB, source="[INFER] half of 128 GiB unified memory (TTM limit)",
               compute_modes=("spx", "tpx", "cpx"), memory_modes=("nps1",)),
)

_BY_KEY = {s.key: s for s in AMD_GPU_SPECS}


def amd_gpu_spec(model: str, where: str = "catalog", field: str = "gpu") -> AmdGpuSpec:
    """Look an AMD model up by key (case-insensitive, ``mi300x``); clear error if unknown."""
    key = str(model).upper().replace("_", "").replace("-", "")
    spec = _BY_KEY.get(key)
    if spec is None:
        close = difflib.get_close_matches(key, _BY_KEY, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise DraConstructsError(where, field, model, "not an AMD GPU model in the catalog",
                                 f"{hint}use one of {', '.join(_BY_KEY)}")
    return spec


def amd_partition_profile(model: str, profile: str, where: str = "catalog") -> AmdPartitionProfile:
    """The profile ``profile`` (``cpx_nps4`` or ``CPX/NPS4``) of ``model``; an invalid pair is refused."""
    spec = amd_gpu_spec(model, where)
    name = str(profile).lower().replace("/", "_").replace("-", "_")
    found = spec.profiles_by_name.get(name)
    if found is None:
        raise DraConstructsError(
            where, "profile", profile,
            f"{spec.key} has no partition profile of that name (the amdgpu kernel driver refuses other "
            "compute/memory mode pairs)",
            f"{spec.key} supports {', '.join(spec.profiles_by_name)}",
        )
    return found
