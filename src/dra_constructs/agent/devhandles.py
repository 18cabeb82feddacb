"""Processes holding a device's nodes open, found through ``<proc_root>/*/fd`` (beyond NVML's lists).

NVML's process lists name only processes with a context; a process can hold the GPU's device
node without one (RM clients that are not contexts, an MPS server between clients, a tool that
opened the node). The drain scans every ``<proc_root>/<pid>/fd/*`` symlink (hostPID: the host's
processes) once per poll and reports each process whose fds point at a node of *this* device:

- a whole GPU: ``/dev/nvidia<minor>``;
- a MIG device: the capability nodes of its GPU instance and compute instances,
  ``/dev/nvidia-caps/nvidia-cap<M>`` with ``M`` the ``DeviceFileMinor:`` line of
  ``/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>/access`` and ``.../gi<G>/ci<C>/access``
  (MIG User Guide, "Device Nodes and Capabilities"), and those ``access`` files themselves (the
  driver's ``/proc``-based capability mode, where a process opens them instead of a ``/dev`` node).
  ``/dev/nvidia<minor>`` of a MIG GPU is the parent's: every instance's tenant holds it, so it is
  context, never this device's evidence.

``/dev/nvidiactl`` and ``/dev/nvidia-uvm*`` are held by every CUDA process of every GPU: context
only, never counted. Processes whose ``comm`` is in ``exempt`` (NVML-only monitors such as
``nvidia-persistenced``, DCGM, the device and kubelet plugins: they hold every GPU's node and no
context) and the agent's own children (its CUDA fill workers of other devices, ``stat`` ppid) are
listed apart and do not count; ``comm`` is the process's own choice, so the exemption drops only
this extra evidence: a process with a context is still in NVML's lists and blocks.

Decision on unreadable fd directories (EACCES/EPERM, e.g. a process the agent may not ptrace-read):
the PID is recorded as ``unknown`` (count and first PIDs) with a warning, and does *not* block. A
PID whose fds cannot be read cannot be shown to hold this device, and every process on the node
is a candidate: blocking on them would hold every release on a node where the agent lacks
``CAP_SYS_PTRACE`` while proving nothing. NVML's list stays the primary source (it still sees any
context such a process has), and the guard (compute mode ``PROHIBITED``, the taint) stays on until
the fill's own checks. A process that exits mid-scan (ENOENT/ESRCH) is gone, not unknown.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dra_constructs.agent.devices import DeviceInfo

__all__ = ["DEFAULT_EXEMPT", "MPS_COMM", "MPS_KINDS", "DeviceHandles", "HandleHolder", "HandleScan", "cap_minor"]

#: ``/proc/<pid>/comm`` of both MPS daemons (TASK_COMM_LEN 16 cuts ``nvidia-cuda-mps-control`` and
#: ``-server`` to the same 15 characters); ``cmdline``'s argv[0] tells them apart.
MPS_COMM = "nvidia-cuda-mps"
MPS_KINDS: dict[str, str] = {"nvidia-cuda-mps-control": "mps-control", "nvidia-cuda-mps-server": "mps-server"}
#: NVML-only monitors that hold every GPU's node without a context (comm, truncated to 15 characters).
DEFAULT_EXEMPT: tuple[str, ...] = ("nvidia-persiste", "nv-hostengine", "dcgm-exporter", "nvidia-device-p",
                                   "gpu-kubelet-plu", "nvidia-smi")
_UNREADABLE_KEPT = 20


def cap_minor(text: str) -> int | None:
    """The ``DeviceFileMinor: M`` of a MIG capability ``access`` file; None if absent or malformed."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "DeviceFileMinor":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


@dataclass(frozen=True)
class HandleHolder:
    """One process with an fd on the device's nodes: what it holds, its comm, ``mps-*`` if an MPS daemon."""

    pid: int
    comm: str
    paths: tuple[str, ...]
    mps: str | None = None


@dataclass
class HandleScan:
    """One scan: holders that count, exempt ones, PIDs whose fds could not be read, what was matched."""

    nodes: tuple[str, ...]
    holders: list[HandleHolder] = field(default_factory=list)
    exempt: list[HandleHolder] = field(default_factory=list)
    unreadable: list[int] = field(default_factory=list)
    scanned: int = 0
    seconds: float = 0.0
    problem: str | None = None

    def summary(self) -> dict[str, object]:
        """The evidence record's ``device_handle_scan``."""
        return {"nodes": list(self.nodes), "scanned": self.scanned, "seconds": round(self.seconds, 6),
                "exempt": [{"pid": h.pid, "comm": h.comm} for h in self.exempt],
                "unreadable": len(self.unreadable), "unreadable_pids": self.unreadable[:_UNREADABLE_KEPT],
                "problem": self.problem}


class DeviceHandles:
    """Scans ``<proc_root>/*/fd`` for a device's nodes; paths are matched as ``readlink`` shows them (host)."""

    def __init__(self, proc_root: str | Path = "/proc", caps_root: str | Path | None = None,
                 exempt: Iterable[str] = DEFAULT_EXEMPT, self_pid: int | None = None) -> None:
        self._root = Path(proc_root)
        self._caps = Path(caps_root) if caps_root is not None else self._root / "driver/nvidia/capabilities"
        self._exempt = frozenset(exempt)
        self._self = os.getpid() if self_pid is None else self_pid

    def nodes(self, device: DeviceInfo) -> tuple[tuple[str, ...], str | None]:
        """The paths that are this device's, and why a MIG device's could not all be mapped (None: all)."""
        if not device.is_mig:
            return (f"/dev/nvidia{device.minor}",), None
        if device.gpu_instance_id is None:
            return (), "the GPU instance id is not known (no MIG capability mapping)"
        gi = f"gpu{device.minor}/mig/gi{device.gpu_instance_id}"
        files = [f"{gi}/access", *(f"{gi}/ci{ci}/access" for ci in device.compute_instance_ids)]
        paths: list[str] = []
        missing: list[str] = []
        for name in files:
            access = self._caps / name
            try:
                minor = cap_minor(access.read_text(encoding="utf-8", errors="replace"))
            except OSError as error:
                missing.append(f"{access}: {error.strerror}")
                continue
            if minor is None:
                missing.append(f"{access}: no DeviceFileMinor line")
                continue
            paths += [f"/dev/nvidia-caps/nvidia-cap{minor}", f"/proc/driver/nvidia/capabilities/{name}"]
        return tuple(paths), ("; ".join(missing) or None)

    def scan(self, device: DeviceInfo) -> HandleScan:
        """Every process (but the agent) whose fds point at this device's nodes; one pass over the PIDs."""
        start = time.monotonic()
        nodes, problem = self.nodes(device)
        result = HandleScan(nodes, problem=problem)
        wanted = frozenset(nodes)
        try:
            entries = [e for e in os.listdir(self._root) if e.isdigit()]
        except OSError as error:
            result.problem = f"cannot list {self._root}: {error.strerror}"
            return result
        for entry in entries:
            pid = int(entry)
            if pid == self._self or not wanted:
                continue
            result.scanned += 1
            held = self._held(pid, wanted, result)
            if held:
                comm = self._comm(pid)
                holder = HandleHolder(pid, comm, held, self._mps(pid) if comm == MPS_COMM else None)
                exempt = comm in self._exempt or self._ppid(pid) == self._self  # the agent's own fill workers
                (result.exempt if exempt else result.holders).append(holder)
        result.seconds = time.monotonic() - start
        return result

    def _held(self, pid: int, wanted: frozenset[str], result: HandleScan) -> tuple[str, ...]:
        fd_dir = f"{self._root}/{pid}/fd"  # strings, not Paths: ~16,000 readlinks per scan of 2,000 PIDs
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            result.unreadable.append(pid)  # cannot be shown to hold it: reported, not blocking
            return ()
        except OSError:
            return ()  # ENOENT/ESRCH: it exited
        held: set[str] = set()
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue  # closed meanwhile
            if target in wanted:
                held.add(target)
        return tuple(sorted(held))

    def _ppid(self, pid: int) -> int | None:
        """The parent PID from ``stat`` (field 4, after the ``(comm)`` that may hold spaces); None if unreadable."""
        try:
            text = (self._root / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
            return int(text.rpartition(")")[2].split()[1])
        except (OSError, IndexError, ValueError):
            return None

    def _comm(self, pid: int) -> str:
        try:
            return (self._root / str(pid) / "comm").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return ""

    def _mps(self, pid: int) -> str:
        """``mps-control`` / ``mps-server`` from argv[0]; ``mps`` if the cmdline cannot say."""
        try:
            argv0 = (self._root / str(pid) / "cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            return "mps"
        return MPS_KINDS.get(os.path.basename(argv0.decode("utf-8", "replace")), "mps")
