"""Names the NVIDIA DRA driver publishes: driver, DeviceClasses, attributes and capacities.

Sources (see ``shared/reference/dra-api.md`` section 9):
- ``NVIDIA/k8s-dra-driver-gpu`` (now ``kubernetes-sigs/dra-driver-nvidia-gpu``) v25.3.0..HEAD,
  ``cmd/gpu-kubelet-plugin/deviceinfo.go`` and ``mig.go`` (attributes, capacities, device names);
- the Helm chart's DeviceClass templates (class selectors).
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "ATTRIBUTE_DOMAIN",
    "DEVICE_CLASS_GPU",
    "DEVICE_CLASS_MIG",
    "DEVICE_CLASS_SELECTORS",
    "DRIVER",
    "GPU_ATTRIBUTES",
    "GPU_CAPACITIES",
    "MIG_ATTRIBUTES",
    "MIG_CAPACITIES",
    "STANDARD_ATTRIBUTE_DOMAIN",
    "AttributeType",
]

#: The DRA driver name for GPUs, MIG devices and VFIO passthrough.
DRIVER: Final = "gpu.nvidia.com"
#: Domain of the NVIDIA attributes and capacities (the driver name).
ATTRIBUTE_DOMAIN: Final = "gpu.nvidia.com"
#: Domain of Kubernetes' standard device attributes (``pcieRoot``, ``pciBusID``).
STANDARD_ATTRIBUTE_DOMAIN: Final = "resource.kubernetes.io"

#: Whole GPUs (``type == 'gpu'``).
DEVICE_CLASS_GPU: Final = "gpu.nvidia.com"
#: MIG slices (``type == 'mig'``); MIG profiles must never be selected under ``gpu.nvidia.com``.
DEVICE_CLASS_MIG: Final = "mig.nvidia.com"

#: The selector each DeviceClass carries in the driver's Helm chart (v25.3+).
DEVICE_CLASS_SELECTORS: Final[dict[str, str]] = {
    DEVICE_CLASS_GPU: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    DEVICE_CLASS_MIG: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    "vfio.gpu.nvidia.com": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'vfio'"
    ),
}

AttributeType = Literal["string", "int", "bool", "version"]

#: Attributes of a whole GPU (``type: gpu``), by name, with their DRA value type.
#: ``index``/``minor`` existed only in v25.3 and ``pcieBusID`` in v25.3-v25.8, so they are not
#: listed: selectors on them fail at run time on current drivers.
GPU_ATTRIBUTES: Final[dict[str, AttributeType]] = {
    "type": "string",
    "uuid": "string",
    "productName": "string",
    "brand": "string",
    "architecture": "string",
    "cudaComputeCapability": "version",
    "driverVersion": "version",
    "cudaDriverVersion": "version",
}

#: Attributes of a MIG device (``type: mig``); product attributes are inherited from the parent.
MIG_ATTRIBUTES: Final[dict[str, AttributeType]] = {
    **GPU_ATTRIBUTES,
    "parentUUID": "string",
    "profile": "string",
}

#: Capacities of a whole GPU: ``memory`` in bytes, NVML's total (``nvmlDeviceGetMemoryInfo``).
GPU_CAPACITIES: Final = ("memory",)

#: Capacities of a MIG device; ``memorySlice<N>`` = 1 for each memory slice it occupies.
MIG_CAPACITIES: Final = (
    "multiprocessors",
    "copyEngines",
    "decoders",
    "encoders",
    "jpegEngines",
    "ofaEngines",
    "memory",
)
