"""Build the AMD backends (AMD SMI, HIP worker with the cleaner shader, health) from an agent config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_constructs.agent.backends.amd_health import AmdHealth
from dra_constructs.agent.backends.amd_hip import HipScrubber
from dra_constructs.agent.backends.amd_isolation import AmdIsolation
from dra_constructs.agent.backends.amd_smi import AmdSmiDevices
from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.limits import worker_slots
from dra_constructs.errors import DraConstructsError

if TYPE_CHECKING:
    from dra_constructs.agent.config import AgentConfig

__all__ = ["amd_backends"]


def amd_backends(config: AgentConfig) -> tuple[AmdSmiDevices, HipScrubber, AmdHealth]:
    """(device backend, scrubber, health source) for ``backend: amd``; a clear error without AMD SMI."""
    try:
        smi = AmdSmiDevices()
    except BackendError as error:
        raise DraConstructsError("AgentConfig", "backend", "amd", f"AMD SMI unavailable: {error}",
                                 "run on an AMD GPU node with the amdgpu driver and ROCm's libamd_smi.so, "
                                 "or use backend: simulated") from error
    isolation = AmdIsolation(config.amd.sysfs_root, enforce=config.amd.enforce_isolation)
    scrubber = HipScrubber(smi.facts, isolation, max_workers=worker_slots(config))
    return smi, scrubber, AmdHealth(smi, scrubber)
