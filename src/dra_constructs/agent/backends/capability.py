"""Can this node perform a cold reset a claim asks for? (The node's own ``partition_reset`` is the admin's.)

A claim's ``coldResetOnRelease`` is honoured only where the reset can succeed; elsewhere the
barrier runs without it and says so (review r07), instead of quarantining every release:

- ``mig-instance`` needs the MIG ``config`` capability (:func:`..migaccess.check_mig_config`:
  NVML answers NO_PERMISSION to GI/CI create and destroy without it);
- ``gpu`` (``nvidia-smi --gpu-reset``) needs no client on the GPU, and the agent's own NVML session
  is one (besides the DRA kubelet plugin, persistenced, DCGM): never available to a claim.
"""

from __future__ import annotations

from dra_constructs.agent.migaccess import check_mig_config

__all__ = ["reset_unavailable"]


def reset_unavailable(kind: str) -> str | None:
    """None if a ``kind`` reset (``mig-instance`` | ``gpu``) can be done here; else the reason."""
    if kind == "mig-instance":
        return check_mig_config()
    return ("a whole-GPU reset (nvidia-smi --gpu-reset) needs no NVML client on the GPU, and the agent's own NVML "
            "session is one (as are the DRA kubelet plugin, persistenced and DCGM)")
