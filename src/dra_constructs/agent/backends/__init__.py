"""Hardware backends behind small interfaces: NVML, CUDA, and a simulated GPU node.

The GPU libraries (``pynvml`` from nvidia-ml-py, ``cuda.bindings`` from cuda-bindings) are
imported lazily inside their backends, so this package imports on any machine.
"""

from dra_constructs.agent.backends.base import (
    BackendError,
    ComputeMode,
    FillResult,
    MemoryScrubber,
    NvmlBackend,
    ProcessSignaller,
    ScrubSession,
    VerifyResult,
)

__all__ = [
    "BackendError",
    "ComputeMode",
    "FillResult",
    "MemoryScrubber",
    "NvmlBackend",
    "ProcessSignaller",
    "ScrubSession",
    "VerifyResult",
]
