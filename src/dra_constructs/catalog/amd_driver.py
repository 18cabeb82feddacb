"""Names the AMD GPU DRA driver publishes: driver, DeviceClass, device types and attributes.

Plain constants, no pydantic: the audit rules (``guardrails.amd``, DRA018) need only these, not the
typed AMD catalog (:mod:`dra_constructs.catalog.amd`, which re-exports them and documents the sources:
ROCm/k8s-gpu-dra-driver ``deviceinfo.go``, ``types.go`` and the Helm chart's ``deviceclass.yaml``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AMD_DEVICE_CLASS",
    "AMD_DEVICE_CLASS_SELECTOR",
    "AMD_DRIVER",
    "AMD_DRIVER_SNAPSHOT",
    "AMD_GPU_ATTRIBUTES",
    "AMD_PARTITION_ATTRIBUTES",
    "AMD_TYPE_GPU",
    "AMD_TYPE_PARTITION",
]

AMD_DRIVER: Final = "gpu.amd.com"
#: The chart's only DeviceClass: whole GPUs and partitions alike (a request must pin ``type``).
AMD_DEVICE_CLASS: Final = "gpu.amd.com"
AMD_DEVICE_CLASS_SELECTOR: Final = "device.driver == 'gpu.amd.com'"
AMD_DRIVER_SNAPSHOT: Final = "ROCm/k8s-gpu-dra-driver@2622427 (2025-10-06)"
AMD_TYPE_GPU: Final = "amdgpu"
AMD_TYPE_PARTITION: Final = "amdgpu-partition"

#: ``AmdGpuInfo.GetDevice``: attributes of a whole GPU (plus ``resource.kubernetes.io/pcieRoot``).
AMD_GPU_ATTRIBUTES: Final[dict[str, str]] = {
    "type": "string", "pciAddr": "string", "cardIndex": "int", "renderIndex": "int", "deviceID": "string",
    "family": "string", "productName": "string", "driverVersion": "version", "driverSrcVersion": "string",
    "partitionProfile": "string",
}
#: ``AmdPartitionInfo.GetDevice``: attributes of a partition (``parent*`` instead of ``deviceID``/``pciAddr``).
AMD_PARTITION_ATTRIBUTES: Final[dict[str, str]] = {
    "type": "string", "parentPciAddr": "string", "cardIndex": "int", "renderIndex": "int",
    "parentDeviceID": "string", "family": "string", "productName": "string", "driverVersion": "version",
    "driverSrcVersion": "string", "partitionProfile": "string",
}
