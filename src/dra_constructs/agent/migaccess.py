"""Can this process create and destroy MIG instances? (DynamicMIG's transient instance needs it.)

NVML's GPU/compute-instance create and destroy calls need the MIG ``config`` capability: the
driver publishes it as ``/proc/driver/nvidia/capabilities/mig/config`` (``DeviceFileMinor: N``)
and, in the default ``/dev``-based mode, as the device node ``/dev/nvidia-caps/nvidia-cap<N>``,
which the process must be able to open (NVIDIA MIG user guide, "Device Nodes and
Capabilities"; dra-driver-nvidia-gpu ``cmd/gpu-kubelet-plugin/nvlib.go`` reads the same files).
Without it every create answers ``NVML_ERROR_NO_PERMISSION``.

:class:`MigAccess` checks that once at start and remembers a refusal NVML gives later; the
barrier then leaves DynamicMIG placements guarded (``dirty``, taint kept, nothing killed) instead
of quarantining each one with "Insufficient Permissions", and the agent says so once: an error
log, an Event, the ``dra_sanitizer_mig_management_unavailable`` gauge and a failing ``/readyz``.
``host_root`` (``DRA_SANITIZER_HOST_ROOT``, default ``/``) is where the host's ``/proc`` and
``/dev`` are seen.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["HOST_ROOT_ENV", "MIG_UNMANAGEABLE", "MigAccess", "check_mig_config"]

_LOG = logging.getLogger("dra_sanitizer.migaccess")

HOST_ROOT_ENV = "DRA_SANITIZER_HOST_ROOT"

#: Reason prefix of a DynamicMIG placement left guarded because the agent cannot manage MIG.
MIG_UNMANAGEABLE = "awaiting MIG management"

_CONFIG = Path("proc/driver/nvidia/capabilities/mig/config")


def check_mig_config(host_root: str | Path | None = None) -> str | None:
    """None if the MIG config capability is usable by this process, else what is missing."""
    root = Path(host_root if host_root is not None else os.environ.get(HOST_ROOT_ENV, "/"))
    config = root / _CONFIG
    try:
        text = config.read_text(encoding="utf-8")
    except OSError as error:
        return f"cannot read /{_CONFIG} ({error.strerror or error}): the pod lacks the MIG config capability"
    minor = None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "DeviceFileMinor":
            minor = value.strip()
    if minor is None:
        return None  # /proc-based capabilities (no device node): reading the file is the check
    node = root / "dev" / "nvidia-caps" / f"nvidia-cap{minor}"
    try:
        fd = os.open(node, os.O_RDONLY)
    except OSError as error:
        return (f"cannot open /dev/nvidia-caps/nvidia-cap{minor} ({error.strerror or error}): the MIG config "
                "capability's device node is missing or outside the pod's device cgroup")
    os.close(fd)
    return None


class MigAccess:
    """The node-wide answer to "can the agent manage MIG", reported once when it is no."""

    def __init__(self, problem: str | None = None, report: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self.problem: str | None = None
        self._report = report
        if problem is not None:
            self.refused(problem)

    def refused(self, problem: str) -> None:
        """The agent cannot manage MIG (start check, or NVML's NO_PERMISSION): say so, once."""
        with self._lock:
            if self.problem is not None:
                return
            self.problem = problem
        _LOG.error("DynamicMIG: the agent cannot create or destroy MIG instances: %s. Freed placements stay "
                   "guarded (taint kept, nobody killed) and are sanitized once the agent runs with the MIG config "
                   "capability (privileged pod, see docs/sanitizer-construct.md)", problem)
        if self._report is not None:
            self._report(problem)
