"""Can this node perform a cold reset a claim asks for? (The node's own ``partition_reset`` is the admin's.)

A claim's ``coldResetOnRelease`` is honoured only where the reset can succeed; elsewhere the
barrier runs without it and says so (review r07), instead of quarantining every release:

- ``mig-instance`` needs the MIG ``config`` capability: ``/proc/driver/nvidia/capabilities/mig/config``
  names the minor of ``/dev/nvidia-caps/nvidia-cap<minor>`` ("DeviceFileMinor: N"), which the process
  must be able to open (NVML answers NO_PERMISSION to GI/CI create and destroy without it);
- ``gpu`` (``nvidia-smi --gpu-reset``) needs no client on the GPU, and the agent's own NVML session
  is one (besides the DRA kubelet plugin, persistenced, DCGM): never available to a claim.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["mig_config_capability", "reset_unavailable"]

_MIG_CONFIG = Path("/proc/driver/nvidia/capabilities/mig/config")
_CAPS = Path("/dev/nvidia-caps")


def mig_config_capability(proc_file: Path = _MIG_CONFIG, caps_dir: Path = _CAPS) -> str | None:
    """None if this process holds the MIG config capability; else why not."""
    try:
        text = proc_file.read_text(encoding="ascii", errors="replace")
    except OSError as error:
        return f"no MIG config capability ({proc_file}: {error.strerror})"
    minor = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.strip().startswith("DeviceFileMinor")), None)
    if minor is None or not minor.isdigit():
        return f"no MIG config capability ({proc_file} names no DeviceFileMinor)"
    node = caps_dir / f"nvidia-cap{minor}"
    if not os.access(node, os.R_OK):
        return f"no MIG config capability ({node} cannot be opened: not in the pod's devices)"
    return None


def reset_unavailable(kind: str) -> str | None:
    """None if a ``kind`` reset (``mig-instance`` | ``gpu``) can be done here; else the reason."""
    if kind == "mig-instance":
        return mig_config_capability()
    return ("a whole-GPU reset (nvidia-smi --gpu-reset) needs no NVML client on the GPU, and the agent's own NVML "
            "session is one (as are the DRA kubelet plugin, persistenced and DCGM)")
