"""dra-constructs: cdk8s constructs for GPU workloads on Kubernetes DRA, compliant by construction."""

from __future__ import annotations

__version__ = "0.1.0"

from .catalog import DEVICE_CLASS_GPU, DEVICE_CLASS_MIG, GpuModel
from .errors import DraConstructsError
from .target import Target

__all__ = [
    "DEVICE_CLASS_GPU",
    "DEVICE_CLASS_MIG",
    "DraConstructsError",
    "GpuModel",
    "Target",
    "__version__",
]
