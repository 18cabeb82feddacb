"""The GPU models of the catalog.

Sources (``shared/reference/dra-api.md`` sections 9.4 and 10):
- MIG profiles and counts: NVIDIA MIG User Guide, "Supported MIG profiles" and "Supported GPUs"
  (docs.nvidia.com/datacenter/tesla/mig-user-guide/), NVIDIA/mig-parted
  ``deployments/systemd/config-default.yaml``.
- NVML memory totals: [3P] thundergolfer.com "Why does an NVIDIA H100 80GB card offer 85.52 GB?"
  for A100 40GB/80GB, H100 80GB and H200; others are [INFER] from vendor nvidia-smi listings and
  marked so in ``memory_source``. Whole-GPU memory selectors use a +-3% band around these totals
  so they stay true on real devices (an H100 80GB reports 79.65 GiB, below "80Gi").
- Streaming multiprocessors per MIG compute-slice count: MIG User Guide tables for A30/A100/H100;
  B200 is [INFER].
"""

from __future__ import annotations

from dra_constructs.catalog.models import GpuSpec, build_profiles

__all__ = ["GPU_SPECS"]

_A100_SMS = {1: 14, 2: 28, 3: 42, 4: 56, 7: 98}
_HOPPER_SMS = {1: 16, 2: 32, 3: 60, 4: 64, 7: 132}
_BLACKWELL_SMS = {1: 18, 2: 36, 3: 72, 4: 72, 7: 144}

_80GB_PROFILES = {
    "1g.10gb": 7, "1g.10gb+me": 1, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1,
}


def _gpu(
    key: str, product_names: tuple[str, ...], architecture: str, compute_capability: str,
    memory_mib: int, memory_source: str, max_mig: int, profiles: dict[str, int], sms: dict[int, int],
) -> GpuSpec:
    return GpuSpec(
        key=key, product_names=product_names, architecture=architecture,
        compute_capability=compute_capability, memory_mib=memory_mib, memory_source=memory_source,
        max_mig_instances=max_mig, mig_profiles=build_profiles(key, memory_mib, profiles, sms),
    )


GPU_SPECS: tuple[GpuSpec, ...] = (
    _gpu("A30", ("NVIDIA A30",), "Ampere", "8.0.0", 24576, "[INFER] 24 GiB HBM2", 4,
         {"1g.6gb": 4, "1g.6gb+me": 1, "2g.12gb": 2, "2g.12gb+me": 1, "4g.24gb": 1},
         {1: 14, 2: 28, 4: 56}),
    _gpu("A100_40GB", ("NVIDIA A100-SXM4-40GB", "NVIDIA A100-PCIE-40GB"), "Ampere", "8.0.0", 40960,
         "[3P] 40,960 MiB", 7,
         {"1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
         _A100_SMS),
    _gpu("A100_80GB", ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe"), "Ampere", "8.0.0", 81920,
         "[3P] 81,920 MiB", 7, _80GB_PROFILES, _A100_SMS),
    _gpu("H100_80GB", ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"), "Hopper", "9.0.0", 81559,
         "[3P] 81,559 MiB (79.65 GiB)", 7, _80GB_PROFILES, _HOPPER_SMS),
    _gpu("H100_NVL_94GB", ("NVIDIA H100 NVL",), "Hopper", "9.0.0", 95830, "[INFER] 95,830 MiB", 7,
         {"1g.12gb": 7, "1g.12gb+me": 1, "1g.24gb": 4, "2g.24gb": 3, "3g.47gb": 2, "4g.47gb": 1, "7g.94gb": 1},
         _HOPPER_SMS),
    _gpu("H200_141GB", ("NVIDIA H200", "NVIDIA H200 NVL"), "Hopper", "9.0.0", 143771,
         "[3P] 143,771 MiB (140.40 GiB)", 7,
         {"1g.18gb": 7, "1g.18gb+me": 1, "1g.35gb": 4, "2g.35gb": 3, "3g.71gb": 2, "4g.71gb": 1, "7g.141gb": 1},
         _HOPPER_SMS),
    _gpu("B200_180GB", ("NVIDIA B200",), "Blackwell", "10.0.0", 183359, "[INFER] 183,359 MiB", 7,
         {"1g.23gb": 7, "1g.23gb+me": 1, "1g.45gb": 4, "2g.45gb": 3, "3g.90gb": 2, "4g.90gb": 1, "7g.180gb": 1},
         _BLACKWELL_SMS),
)
