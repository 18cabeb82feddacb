"""The interfaces the barrier talks to; one real and one simulated implementation each.

Enumeration contract (:meth:`NvmlBackend.enumerate`): a GPU or MIG instance that NVML cannot
read (``GPU_IS_LOST``, ``NO_PERMISSION``, ...) is never dropped silently. It comes back as an
:class:`EnumerationError` beside the devices that could be read; :meth:`EnumerationResult.may_hide`
tells whether a DRA device name could belong to such a failed part, so the agent keeps a
guard on (and alerts about) any claim on a device it cannot map, instead of skipping it.
``devices()`` is the strict form: the devices, or :class:`EnumerationFailed` if anything failed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import threading
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from dra_constructs.agent.devices import DeviceInfo

__all__ = [
    "BackendError",
    "ComputeInstanceGuard",
    "ComputeMode",
    "ComputeModeUnsupported",
    "EnumerationError",
    "EnumerationFailed",
    "EnumerationResult",
    "FillResult",
    "ForeignPidNamespaceSignaller",
    "MemoryInfo",
    "MemoryScrubber",
    "NvmlBackend",
    "OsSignaller",
    "PartitionBackend",
    "ProcessSignaller",
    "ScrubSession",
    "SignalRefused",
    "VerifyResult",
    "host_pid_namespace",
    "host_signaller",
    "lsm_confinement",
]


class BackendError(Exception):
    """A hardware call failed. ``fatal``: the device is gone or broken (quarantine at once)."""

    def __init__(self, op: str, message: str, fatal: bool = False) -> None:
        self.op = op
        self.fatal = fatal
        super().__init__(f"{op}: {message}")


class ComputeModeUnsupported(BackendError):
    """NVML cannot set this compute mode on this device: a MIG device before the CUDA 13.3 NVML.

    nvml.h CUDA 11.1 .. 13.2.1, ``nvmlDeviceSetComputeMode``: "On MIG-enabled GPUs, compute mode
    would be set to DEFAULT and changing it is not supported" (``NVML_ERROR_NOT_SUPPORTED``). Also
    raised when NVML accepts a mode but reads back another one. The device is DEFAULT all along.
    """


class ComputeMode(StrEnum):
    """NVML compute modes the agent uses (values are NVML's)."""

    DEFAULT = "default"                    # NVML_COMPUTEMODE_DEFAULT = 0
    EXCLUSIVE_PROCESS = "exclusive-process"  # = 3: one context, ours, while we scrub
    PROHIBITED = "prohibited"              # = 2: no new contexts (between tenants, quarantine)


@dataclass(frozen=True)
class EnumerationError:
    """A GPU or MIG instance NVML could not read while enumerating (it is not in the device list).

    ``minor`` is None when even the GPU's minor number is unknown: then any device name may
    belong to it. ``gpu_instance_id`` is set when only one MIG GPU instance failed.
    """

    gpu_index: int
    op: str
    message: str
    fatal: bool = False
    minor: int | None = None
    uuid: str | None = None
    gpu_instance_id: int | None = None

    def may_hide(self, name: str) -> bool:
        """True if the DRA device ``name`` could be a device this failure left out."""
        if self.minor is None:
            return True
        if self.gpu_instance_id is None:
            return name == f"gpu-{self.minor}" or name.startswith(f"gpu-{self.minor}-mig-")
        return name.startswith(f"gpu-{self.minor}-mig-")

    def __str__(self) -> str:
        where = f"GPU index {self.gpu_index}" + (f" (gpu-{self.minor})" if self.minor is not None else "")
        if self.gpu_instance_id is not None:
            where += f" GPU instance {self.gpu_instance_id}"
        return f"{where}: {self.op}: {self.message}"


@dataclass(frozen=True)
class EnumerationResult:
    """What one enumeration found: readable devices, and the parts that failed."""

    devices: list[DeviceInfo]
    errors: list[EnumerationError] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when every GPU and MIG instance was read."""
        return not self.errors

    def may_hide(self, name: str) -> bool:
        """True if ``name`` could be a device that a failed part of the enumeration left out."""
        return any(error.may_hide(name) for error in self.errors)


class EnumerationFailed(BackendError):
    """:meth:`NvmlBackend.devices` when part of the node could not be enumerated."""

    def __init__(self, result: EnumerationResult) -> None:
        self.result = result
        fatal = any(error.fatal for error in result.errors)
        super().__init__("enumerate", "; ".join(map(str, result.errors)), fatal=fatal)


@dataclass(frozen=True)
class MemoryInfo:
    """``nvmlDeviceGetMemoryInfo_v2`` of a device or MIG instance: ``reserved`` is the driver's own."""

    total: int
    reserved: int
    free: int
    used: int


class NvmlBackend(Protocol):
    """Device inventory, the processes holding contexts, and compute mode (NVML's job)."""

    def enumerate(self) -> EnumerationResult:
        """Every sanitizable device (whole GPUs, MIG GPU instances) and what could not be read."""

    def devices(self) -> list[DeviceInfo]:
        """The devices of :meth:`enumerate`; raises :class:`EnumerationFailed` if anything failed."""

    def processes(self, device: DeviceInfo) -> list[int]:
        """PIDs (host namespace) holding compute or graphics contexts on the device.

        For a MIG GPU instance: the processes of every compute instance of it.
        """

    def memory(self, device: DeviceInfo) -> MemoryInfo:
        """The device's memory as NVML sees it (before our context exists)."""

    def set_compute_mode(self, device: DeviceInfo, mode: ComputeMode) -> None:
        """Set the device's compute mode (MIG: on the MIG device handles).

        Raises :class:`ComputeModeUnsupported` where the driver cannot (MIG before CUDA 13.3);
        DEFAULT there is not an error (the mode is DEFAULT already).
        """

    def scrub_on_free_disabled(self) -> bool | None:
        """True if the driver's scrub-on-free is off on this node; None if unknown."""


class ProcessSignaller(Protocol):
    """Sends signals to host PIDs."""

    def signal(self, pid: int, signum: int) -> bool:
        """Send ``signum``; False if the process no longer exists; :class:`SignalRefused` if refused."""


class SignalRefused(BackendError):
    """The kernel refused the signal (EPERM): the reason names why, so the quarantine says it."""

    def __init__(self, pid: int, signum: int, detail: str) -> None:
        name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else str(signum)
        super().__init__(
            f"kill({pid}, {name})",
            f"refused by the kernel (EPERM): {detail}. The agent needs CAP_KILL in the host user namespace, "
            f"hostPID: true, and no AppArmor/SELinux policy that blocks signals to other containers' "
            f"processes (e.g. an AppArmor 'signal' rule or SELinux type enforcement between pods)",
        )


def _process_identity(pid: int) -> tuple[int, int] | None:
    """(uid, start time in clock ticks) of a live process, from /proc; None if unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
        uid = os.stat(f"/proc/{pid}").st_uid
    except (OSError, LookupError):
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return uid, int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else -1


class OsSignaller:
    """Signals host PIDs (the agent runs with ``hostPID: true``), through pidfds where available.

    :meth:`pin` opens a pidfd (``os.pidfd_open``, Linux >= 5.3) before the listing that names the
    PID, and every signal (the SIGTERM, the SIGKILL after the grace period) goes through that
    same pidfd (``signal.pidfd_send_signal``), so a PID reused by another process in between is
    never signalled; a PID that was never pinned (its pin failed) is not signalled at all.
    Without pidfds it falls back to ``os.kill``. A refused signal raises
    :class:`SignalRefused` naming the cause, never a bare ``PermissionError``.
    """

    def __init__(self, use_pidfd: bool | None = None) -> None:
        self._pidfd = (hasattr(os, "pidfd_open") and hasattr(signal, "pidfd_send_signal")) \
            if use_pidfd is None else use_pidfd
        self._fds: dict[int, int] = {}
        #: PIDs whose pidfd showed them gone (pruned) or that got SIGKILL: a later signal would open
        #: a new pidfd for whatever process has that number now, so it is refused until ``pin``
        #: (the barrier's re-list and owner re-read) names the PID again.
        self._ended: set[int] = set()
        self._lock = threading.Lock()

    def _fd(self, pid: int) -> int | None:
        with self._lock:
            fd = self._fds.get(pid)
            if fd is None:
                fd = os.pidfd_open(pid)  # ProcessLookupError if gone
                self._fds[pid] = fd
            return fd

    def _forget(self, pid: int) -> None:
        with self._lock:
            fd = self._fds.pop(pid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _prune(self) -> None:
        """Close the pidfds of processes that have exited (they exit after SIGTERM on their own)."""
        with self._lock:
            cached = list(self._fds.items())
        for pid, fd in cached:
            try:
                signal.pidfd_send_signal(fd, 0)
            except ProcessLookupError:
                self._forget(pid)
                with self._lock:
                    self._ended.add(pid)
            except OSError:
                pass

    def pin(self, pid: int) -> bool:
        """Open and keep a pidfd for ``pid`` now; True if newly opened (the caller re-lists, see barrier).

        False without pidfds, for a pid already pinned, or one that is gone.
        """
        if not self._pidfd:
            return False
        self._prune()
        with self._lock:
            if pid in self._fds:
                return False
        try:
            self._fd(pid)
        except OSError:  # ProcessLookupError: gone; others: signal() reports them
            return False
        with self._lock:
            self._ended.discard(pid)
        return True

    def signal(self, pid: int, signum: int) -> bool:
        if self._pidfd:
            self._prune()
            with self._lock:
                if pid in self._ended:
                    return False  # its pidfd saw it end; the number may be another process's now
        try:
            if self._pidfd:
                with self._lock:
                    fd = self._fds.get(pid)
                if fd is None:  # never pinned (a failed pin): a pidfd opened now may be the PID's next owner's
                    return False
                signal.pidfd_send_signal(fd, signum)
            else:
                os.kill(pid, signum)
        except ProcessLookupError:
            self._forget(pid)
            return False
        except PermissionError as error:
            raise SignalRefused(pid, signum, _refusal_detail(pid, error)) from error
        except OSError as error:
            if error.errno == errno.ESRCH:
                self._forget(pid)
                return False
            raise BackendError(f"kill({pid}, {signum})", f"{type(error).__name__}: {error}") from error
        if signum == signal.SIGKILL:
            self._forget(pid)
            with self._lock:
                self._ended.add(pid)
        return True


def host_pid_namespace(proc: Path = Path("/proc")) -> bool:
    """True if we see the host's PID namespace (PID 2 is the kernel's ``kthreadd``)."""
    try:
        return (proc / "2" / "comm").read_text().strip() == "kthreadd"
    except OSError:
        return False


def lsm_confinement(proc: Path = Path("/proc")) -> str | None:
    """The agent's own AppArmor profile or SELinux domain if it confines reads of other processes, else None.

    AppArmor (``attr/apparmor/current``, kernel 5.8+, else ``attr/current``): any profile but
    ``unconfined``; the runtimes' default container profile allows ptrace reads only to peers under
    the same profile. SELinux (``attr/current``): the ``container_t`` family (``spc_t``, a privileged
    container's domain, is not confined). Unreadable or absent: None (no LSM to name).
    """
    for name in ("attr/apparmor/current", "attr/current"):
        try:
            label = (proc / "self" / name).read_text().strip().rstrip("\x00").strip()
        except OSError:
            continue
        if not label:
            continue
        if ":" in label:  # an SELinux context user:role:type:level
            parts = label.split(":")
            return label if len(parts) > 2 and parts[2].startswith("container_") else None
        return None if label == "unconfined" else label
    return None


class ForeignPidNamespaceSignaller:
    """Refuses every signal: the agent is not in the host PID namespace (no ``hostPID: true``).

    NVML lists host PIDs, and ``/proc`` and ``kill`` here number processes of another namespace, so a
    signal by number could hit an unrelated process (or none). Fail closed: each signal raises
    :class:`~dra_constructs.agent.backends.base.BackendError`, the barrier quarantines the device with
    that reason, and nothing is signalled.
    """

    REASON = ("the agent is not in the host PID namespace (hostPID: true is missing): NVML's PIDs are host PIDs, "
              "so no process is signalled by number here")

    def pin(self, pid: int) -> bool:
        return False

    def signal(self, pid: int, signum: int) -> bool:
        raise BackendError(f"kill({pid}, {signum})", self.REASON)


def host_signaller() -> ProcessSignaller:
    """:class:`OsSignaller` in the host PID namespace; elsewhere one that refuses every signal (fail closed)."""
    return OsSignaller() if host_pid_namespace() else ForeignPidNamespaceSignaller()


def _refusal_detail(pid: int, error: OSError) -> str:
    """Why a signal to ``pid`` may have been refused: the target's owner against ours, LSM in use."""
    parts = [error.strerror or "Operation not permitted"]
    identity = _process_identity(pid)
    if identity is not None and identity[0] != os.geteuid():
        parts.append(f"target uid {identity[0]}, agent euid {os.geteuid()}")
    with contextlib.suppress(OSError, LookupError), open("/sys/kernel/security/lsm", "rb") as handle:
        lsm = handle.read().decode("ascii", "replace")
        active = [m for m in re.split(r"[,\s]+", lsm) if m in ("apparmor", "selinux", "smack", "tomoyo", "landlock")]
        if active:
            parts.append(f"active security modules: {', '.join(active)}")
    return "; ".join(parts)


@dataclass(frozen=True)
class FillResult:
    """What one zero-fill covered. ``bytes_free`` is ``cuMemGetInfo`` free after our context.

    ``seconds`` is allocation + memset; ``memset_seconds`` the memset alone (the fill
    bandwidth), None where the backend cannot tell them apart.
    """

    bytes_total: int
    bytes_free: int
    bytes_zeroed: int
    seconds: float
    memset_seconds: float | None = None


@dataclass(frozen=True)
class VerifyResult:
    """Device-side read-back of the filled memory.

    ``bytes_verified`` is what the kernel itself counted as read (8 x the 64-bit words it
    examined), not what was asked of it. ``control_planted`` / ``control_found``: the
    positive control, marker words planted in the zeroed memory before the kernel ran and
    the markers it counted (``nonzero_words`` excludes them); the kernel's zero is trusted
    only if it found every one. None where a backend has no control.
    """

    bytes_verified: int
    nonzero_words: int
    seconds: float
    control_planted: int | None = None
    control_found: int | None = None


class ScrubSession(Protocol):
    """One context on exactly one device (whole GPU or MIG slice), owned by process ``pid``."""

    @property
    def pid(self) -> int:
        """Host PID of the process that holds the context (it will show up in NVML)."""

    def fill(self) -> FillResult:
        """Allocate nearly all free memory and set it to zero (allocations are kept)."""

    def verify(self) -> VerifyResult:
        """Check on the device that every filled byte is zero."""

    def close(self) -> None:
        """Free everything and destroy the context (idempotent)."""


class MemoryScrubber(Protocol):
    """Opens scrub sessions (CUDA, or the simulated GPU)."""

    def open(self, device: DeviceInfo, timeout_s: float) -> ScrubSession:
        """Create the context; raises :class:`BackendError` if it cannot."""


class PartitionBackend(Protocol):
    """MIG partitions the agent creates and destroys itself (cold reset, DynamicMIG), and GPU reset.

    Errors are :class:`BackendError` whose message names the NVML code (``IN_USE``,
    ``INSUFFICIENT_RESOURCES``, ...). Implementations: :mod:`.partitions` (NVML) and the
    simulated node.
    """

    def instance(self, device: DeviceInfo) -> DeviceInfo | None:
        """The MIG instance now at the device's placement (its real UUID), or None if there is none."""

    def create(self, device: DeviceInfo) -> DeviceInfo:
        """Create the GPU instance (and its compute instances) at the device's placement; the new info."""

    def destroy(self, device: DeviceInfo) -> None:
        """Destroy every compute instance and the GPU instance at the device's placement."""

    def reset_gpu(self, device: DeviceInfo, timeout_s: float) -> DeviceInfo:
        """Reset the whole GPU of a non-MIG device; the (re-read) info."""


#: A compute instance's (CI profile id, placement start, placement size) inside its GPU instance.
CiLayout = list[tuple[int, int, int]]


class ComputeInstanceGuard(Protocol):
    """The local guard of a static MIG slice where compute mode cannot be set: no compute instance, no context.

    A MIG device is a compute instance; with none left in the GPU instance no process can create
    a CUDA context on its memory. NVML refuses (``IN_USE``) while any process holds a context
    there: then the slice cannot be guarded locally. The recreated compute instances get new
    MIG UUIDs.
    """

    def close(self, device: DeviceInfo) -> CiLayout:
        """Destroy every compute instance of the device's GPU instance; the layout that was there."""

    def reopen(self, device: DeviceInfo, layout: CiLayout | None) -> DeviceInfo:
        """Recreate the compute instances (``layout``, or one over the whole GPU instance); the new info."""
