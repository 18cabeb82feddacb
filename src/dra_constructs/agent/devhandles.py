"""Processes holding a device's nodes open, found through ``<proc_root>/*/fd`` (beyond NVML's lists).

NVML's process lists name only processes with a context; a process can hold the GPU's device
node without one (RM clients that are not contexts, an MPS server between clients, a tool that
opened the node). The drain scans every ``<proc_root>/<pid>/fd/*`` once per poll and reports each
process whose fds point at a node of *this* device. Matched by the **device number**
(``os.stat`` of the fd link follows it to the open inode: ``st_rdev``), never by the path: a
container sees the node under whatever path its runtime mounted it at, in its own mount
namespace; the ``readlink`` path is only the label shown in the evidence.

- a whole GPU: character device ``195:<minor>`` (``NV_MAJOR_DEVICE_NUMBER``; ``<proc_root>/devices``
  says ``nvidia-frontend`` or ``nvidia`` where it lists the major);
- a MIG device: the capability nodes of its GPU instance and compute instances, major
  ``nvidia-caps`` from ``<proc_root>/devices`` (dynamic), minor the ``DeviceFileMinor:`` line of
  ``/proc/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>/access`` and ``.../gi<G>/ci<C>/access``
  (MIG User Guide, "Device Nodes and Capabilities"), and those ``access`` files themselves (the
  driver's ``/proc``-based capability mode, where a process opens them instead of a ``/dev``
  node), matched by their inode (``st_dev``, ``st_ino``). ``195:<minor>`` of a MIG GPU is the
  parent's: every instance's tenant holds it, so it is context, never this device's evidence.

``/dev/nvidiactl`` (``195:255``) and ``/dev/nvidia-uvm*`` are held by every CUDA process of every
GPU: context only, never counted. NVML-only monitors (``nvidia-persistenced``, DCGM, the device
and kubelet plugins: they hold every GPU's node and no context) are exempt by
:class:`ExemptRule`: the executable (``readlink /proc/<pid>/exe``, which a process cannot set the
way it sets its ``comm``) *and* its owner: a host process (cgroup outside ``kubepods``, and the
mount namespace of PID 1 so the path names the host's file, not a container's), or a pod
in one of the rule's namespaces, and the rule's uid if it names one (``Uid:`` of ``status``,
real and effective). A pod can put any binary at ``/usr/bin/nvidia-smi`` in its own image, so
the executable alone exempts nothing. A host daemon in its own mount namespace (systemd
``ProtectSystem=``, ``PrivateTmp=``...) fails the host rule's mount-namespace check; the owner
``host-systemd-unit`` names it instead (review finding 6): its cgroup is
``/system.slice/<unit>`` (only systemd on the host puts a process there), it runs in the host's
PID namespace (``ns/pid`` of PID 1) and as root (real and effective uid 0, or the rule's uid),
and its ``exe`` is the rule's. The agent's own children (its CUDA fill workers of other
devices, ``stat`` ppid) are exempt too. Exempt holders are listed apart and do not count; a
process with a context is still in NVML's lists and blocks.

Mappings count as holding (review finding 3): a process can ``mmap`` a device node and close
the fd; the mapping keeps the file open (``vm_file``). Each PID's ``maps`` (proc(5): the
``dev``/``inode`` columns are the mapped *file's* filesystem and inode, not ``st_rdev``) names its
file mappings; each distinct file is followed once per scan through
``<proc_root>/<pid>/map_files/<start>-<end>`` (``os.stat``: ``st_rdev``, proc(5): following these
links needs ``CAP_SYS_ADMIN``/``CAP_CHECKPOINT_RESTORE``, which the privileged agent pod has) and
compared like an fd.

Unreadable fd directories, ``maps`` or ``map_files`` (EACCES/EPERM: the agent lacks
``CAP_SYS_PTRACE``, proc(5) "ptrace access mode PTRACE_MODE_READ_FSCREDS", or an LSM refuses;
review finding 2): such a process may hold the device, so it **blocks the release** (the scan is
``failed``: Warning Event, metric, guard kept, retried; it is never signalled: that it holds the
device is not known) unless it is provably not a holder by a check that does not need its fds:
- a zombie or dead task (``stat`` state ``Z``/``X``; ``do_exit`` closed its files and dropped its
  memory before it became one);
- a kernel thread (``stat`` flags ``PF_KTHREAD``, 0x00200000): no user file table;
- an exempt rule matching it (which needs ``exe`` and the owner, so in practice only where an LSM
  refuses the fds but not ``exe``).
Its owner (a pod of another claim, the host) proves nothing: a holder of any owner blocks the
release, and a device cgroup only checks ``open``, not an fd inherited or passed over a socket.
A process that exits mid-scan (ENOENT/ESRCH) is gone, not unknown.

A scan that cannot list ``<proc_root>`` and a MIG device whose capability nodes cannot all be
mapped (review finding 1: an unmapped node's holders would be invisible) are ``failed`` too.
``failed`` means "holders cannot be ruled out": the barrier posts a Warning Event
(``DeviceHandleScanFailed``), counts it (``dra_sanitizer_device_handle_scan_problems_total``),
quarantines with the self-clearing reason ``device handle scan failed`` (guard kept, nobody
killed) and re-runs the barrier once a scan succeeds and finds nobody (see :mod:`.barrier`).
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.owners import Owner, ProcOwners
from dra_constructs.errors import DraConstructsError

__all__ = ["DEFAULT_EXEMPT", "MPS_COMM", "MPS_KINDS", "NVIDIA_MAJOR", "DeviceHandles", "ExemptRule", "HandleHolder",
           "HandleScan", "cap_minor", "char_majors"]

#: ``/proc/<pid>/comm`` of both MPS daemons (TASK_COMM_LEN 16 cuts ``nvidia-cuda-mps-control`` and
#: ``-server`` to the same 15 characters); ``cmdline``'s argv[0] tells them apart.
MPS_COMM = "nvidia-cuda-mps"
MPS_KINDS: dict[str, str] = {"nvidia-cuda-mps-control": "mps-control", "nvidia-cuda-mps-server": "mps-server"}
#: ``NV_MAJOR_DEVICE_NUMBER`` of the NVIDIA driver (``/dev/nvidia<N>`` is ``195:N``, ``/dev/nvidiactl`` ``195:255``).
NVIDIA_MAJOR = 195
_NVIDIA_NAMES = ("nvidia-frontend", "nvidia")
_CAPS_NAME = "nvidia-caps"
_UNREADABLE_KEPT = 20
#: ``PF_KTHREAD`` of include/linux/sched.h: the ``flags`` field (9th) of ``/proc/<pid>/stat``.
_PF_KTHREAD = 0x00200000
#: A systemd unit name (systemd.unit(5): "[a-zA-Z0-9:_.\\-]" plus ``@`` for templates, and a type suffix).
_UNIT = re.compile(r"^[A-Za-z0-9:_.\\@-]+\.(service|scope)$")
#: Namespaces the GPU operator and the NVIDIA DRA driver install their monitors and plugins into.
_OPERATOR_NAMESPACES = ("gpu-operator", "nvidia-gpu-operator", "nvidia-dra-driver-gpu", "kube-system")


class ExemptRule(BaseModel):
    """An NVML-only monitor that may hold every GPU's node: its executable and who must own it."""

    model_config = ConfigDict(extra="forbid")

    exe: str = Field(description="``readlink /proc/<pid>/exe`` as the process's own mount namespace shows it.")
    owner: Literal["host", "pod", "host-systemd-unit"] = Field(
        default="host", description="host: a process outside kubepods in the host's mount namespace; pod: a pod "
                                    "in one of ``namespaces``; host-systemd-unit: a host daemon in its own mount "
                                    "namespace (systemd ProtectSystem=, PrivateTmp=...) in the cgroup of ``unit`` "
                                    "under system.slice, in the host's PID namespace, as root.")
    namespaces: list[str] = Field(default_factory=list, description="owner pod: the pod's namespace is one of these.")
    unit: str | None = Field(default=None, description="owner host-systemd-unit: the systemd unit "
                                                       "(e.g. nvidia-persistenced.service).")
    uid: int | None = Field(default=None, description="The real and effective uid it must run as (None: any; "
                                                      "host-systemd-unit: 0 unless set).")

    @model_validator(mode="after")
    def _unit_rule(self) -> ExemptRule:
        """``host-systemd-unit`` needs a unit name that systemd could have made, and nothing else needs one."""
        if self.owner == "host-systemd-unit":
            if self.unit is None or not _UNIT.match(self.unit):
                raise DraConstructsError(
                    f"ExemptRule {self.exe}", "unit", self.unit,
                    "owner host-systemd-unit needs the systemd unit whose cgroup under system.slice holds the daemon",
                    "name a unit such as nvidia-persistenced.service (letters, digits, ':-_.\\@', a type suffix)")
            if not self.exe.startswith("/"):
                raise DraConstructsError(f"ExemptRule {self.exe}", "exe", self.exe, "not an absolute path",
                                         "give the executable's absolute path on the host")
        elif self.unit is not None:
            raise DraConstructsError(f"ExemptRule {self.exe}", "unit", self.unit,
                                     f"only owner host-systemd-unit takes a unit (owner is {self.owner})",
                                     "drop unit, or set owner: host-systemd-unit")
        return self


#: NVML-only monitors that hold every GPU's node without a context.
DEFAULT_EXEMPT: tuple[ExemptRule, ...] = (
    *(ExemptRule(exe=f"/usr/bin/{name}") for name in ("nvidia-persistenced", "nv-hostengine", "nvidia-smi")),
    *(ExemptRule(exe=f"/usr/bin/{name}", owner="pod", namespaces=list(_OPERATOR_NAMESPACES))
      for name in ("nvidia-persistenced", "dcgm-exporter", "nv-hostengine", "nvidia-device-plugin",
                   "gpu-kubelet-plugin", "nvidia-smi")),
)


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


def char_majors(text: str) -> dict[str, int]:
    """Driver name -> major of the ``Character devices:`` section of ``/proc/devices``."""
    majors: dict[str, int] = {}
    section = False
    for line in text.splitlines():
        if line.strip().endswith("devices:"):
            section = line.strip() == "Character devices:"
            continue
        number, _, name = line.strip().partition(" ")
        if section and number.isdigit() and name.strip():
            majors.setdefault(name.strip(), int(number))
    return majors


@dataclass(frozen=True)
class HandleHolder:
    """One process with an fd on the device's nodes: what it holds (labels), its comm, ``mps-*`` if MPS."""

    pid: int
    comm: str
    paths: tuple[str, ...]
    mps: str | None = None
    exe: str | None = None


@dataclass
class HandleScan:
    """One scan: holders that count, exempt ones, PIDs whose fds could not be read, what was matched.

    ``failed``: holders cannot be ruled out (the proc root could not be listed, a MIG device's
    capability nodes could not all be mapped, a process's fds or mappings could not be read and
    it is not provably no holder): the release is refused; ``problem``: why. The holders found
    in what could be read are still listed.
    """

    nodes: tuple[str, ...]
    holders: list[HandleHolder] = field(default_factory=list)
    exempt: list[HandleHolder] = field(default_factory=list)
    unreadable: list[int] = field(default_factory=list)
    scanned: int = 0
    seconds: float = 0.0
    problem: str | None = None
    devices: tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Every problem is one that leaves holders unruled out: a scan with a problem failed."""
        return self.problem is not None

    def summary(self) -> dict[str, object]:
        """The evidence record's ``device_handle_scan``."""
        return {"nodes": list(self.nodes), "devices": list(self.devices), "scanned": self.scanned,
                "seconds": round(self.seconds, 6),
                "exempt": [{"pid": h.pid, "comm": h.comm, "exe": h.exe} for h in self.exempt],
                "unreadable": len(self.unreadable), "unreadable_pids": self.unreadable[:_UNREADABLE_KEPT],
                "problem": self.problem, "failed": self.failed}


@dataclass(frozen=True)
class _Wanted:
    """What an fd must point at to be this device's: device numbers, inodes, and their labels."""

    rdevs: frozenset[int]
    inodes: frozenset[tuple[int, int]]
    labels: tuple[str, ...]
    devices: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.rdevs or self.inodes)


class DeviceHandles:
    """Scans ``<proc_root>/*/fd`` for a device's nodes by device number (``st_rdev``) or inode."""

    def __init__(self, proc_root: str | Path = "/proc", caps_root: str | Path | None = None,
                 exempt: Iterable[ExemptRule] = DEFAULT_EXEMPT, self_pid: int | None = None,
                 owners: Callable[[int], Owner] | None = None,
                 pod_name: Callable[[str], str | None] = lambda _uid: None) -> None:
        self._root = Path(proc_root)
        self._root_text = str(self._root)
        self._caps = Path(caps_root) if caps_root is not None else self._root / "driver/nvidia/capabilities"
        self._exempt = tuple(exempt)
        self._self = os.getpid() if self_pid is None else self_pid
        self._owners = owners if owners is not None else ProcOwners(self._root)
        #: ``namespace/name`` of a pod UID (the agent's pod list); set once the agent knows it.
        self.pod_name = pod_name

    def _majors(self) -> tuple[int, int | None]:
        """(nvidia major, nvidia-caps major or None) from ``<proc_root>/devices``."""
        try:
            majors = char_majors((self._root / "devices").read_text(encoding="utf-8", errors="replace"))
        except OSError:
            majors = {}
        nvidia = next((majors[n] for n in _NVIDIA_NAMES if n in majors), NVIDIA_MAJOR)
        return nvidia, majors.get(_CAPS_NAME)

    def nodes(self, device: DeviceInfo) -> tuple[tuple[str, ...], str | None]:
        """The labels of this device's nodes, and why a MIG device's could not all be mapped (None: all)."""
        wanted, problem = self._wanted(device)
        return wanted.labels, problem

    def _wanted(self, device: DeviceInfo) -> tuple[_Wanted, str | None]:
        nvidia, caps = self._majors()
        if not device.is_mig:
            return _Wanted(frozenset({os.makedev(nvidia, device.minor)}), frozenset(),
                           (f"/dev/nvidia{device.minor}",), (f"{nvidia}:{device.minor}",)), None
        if device.gpu_instance_id is None:
            unknown = "the GPU instance id is not known (no MIG capability mapping)"
            return _Wanted(frozenset(), frozenset(), (), ()), unknown
        gi = f"gpu{device.minor}/mig/gi{device.gpu_instance_id}"
        files = [f"{gi}/access", *(f"{gi}/ci{ci}/access" for ci in device.compute_instance_ids)]
        rdevs: set[int] = set()
        inodes: set[tuple[int, int]] = set()
        labels: list[str] = []
        numbers: list[str] = []
        missing: list[str] = []
        if caps is None:
            missing.append(f"{self._root / 'devices'}: no {_CAPS_NAME} major (capability nodes not matched)")
        for name in files:
            access = self._caps / name
            try:
                minor = cap_minor(access.read_text(encoding="utf-8", errors="replace"))
                info = os.stat(access)
            except OSError as error:
                missing.append(f"{access}: {error.strerror}")
                continue
            inodes.add((info.st_dev, info.st_ino))
            labels.append(f"/proc/driver/nvidia/capabilities/{name}")
            if minor is None:
                missing.append(f"{access}: no DeviceFileMinor line")
                continue
            if caps is not None:
                rdevs.add(os.makedev(caps, minor))
                labels.append(f"/dev/nvidia-caps/nvidia-cap{minor}")
                numbers.append(f"{caps}:{minor}")
        return _Wanted(frozenset(rdevs), frozenset(inodes), tuple(sorted(labels)), tuple(numbers)), (
            "; ".join(missing) or None)

    def scan(self, device: DeviceInfo) -> HandleScan:
        """Every process (but the agent) whose fds point at this device's nodes; one pass over the PIDs."""
        start = time.monotonic()
        wanted, problem = self._wanted(device)
        # An unmapped node's holders would be invisible: fail closed (review finding 1).
        result = HandleScan(wanted.labels, problem=problem, devices=wanted.devices)
        try:
            entries = [e for e in os.listdir(self._root) if e.isdigit()]
        except OSError as error:
            result.problem = f"cannot list {self._root}: {error.strerror}"
            return result
        files: dict[tuple[str, str], bool] = {}  # mapped file (dev, ino) -> this device's; one stat each
        for entry in entries:
            pid = int(entry)
            if pid == self._self or not wanted:
                continue
            result.scanned += 1
            held, readable = self._held(pid, wanted, files)
            if not held and readable:
                continue
            if not readable and self._no_files(pid):
                continue  # a zombie or a kernel thread: holds no file (module docstring)
            comm = self._comm(pid)
            exe = self._exe(pid)
            holder = HandleHolder(pid, comm, held or ("fds or mappings unreadable",),
                                  self._mps(pid) if comm == MPS_COMM else None, exe)
            exempt = self._ppid(pid) == self._self or self._is_exempt(pid, exe)  # our fill workers
            if exempt:
                result.exempt.append(holder)
            elif held:
                result.holders.append(holder)
            if not readable and not exempt:
                result.unreadable.append(pid)  # may hold it: blocks the release, never signalled
        if result.unreadable:
            shown = ", ".join(map(str, result.unreadable[:_UNREADABLE_KEPT]))
            more = f" and {len(result.unreadable) - _UNREADABLE_KEPT} more" if len(
                result.unreadable) > _UNREADABLE_KEPT else ""
            unread = (f"fds or mappings of {len(result.unreadable)} process(es) cannot be read (EACCES/EPERM; the "
                      f"agent needs CAP_SYS_PTRACE and CAP_SYS_ADMIN): pids {shown}{more}; any of them may hold "
                      "the device")
            result.problem = f"{result.problem}; {unread}" if result.problem else unread
        result.seconds = time.monotonic() - start
        return result

    def _held(self, pid: int, wanted: _Wanted, files: dict[tuple[str, str], bool]) -> tuple[tuple[str, ...], bool]:
        """Labels of this device's nodes ``pid`` holds by an fd or a mapping, and whether both could be read."""
        fd_dir = f"{self._root_text}/{pid}/fd"  # strings, not Paths: ~16,000 stats per scan of 2,000 PIDs
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            return (), False
        except OSError:
            return (), True  # ENOENT/ESRCH: it exited
        held: set[str] = set()
        for fd in fds:
            link = f"{fd_dir}/{fd}"
            try:
                info = os.stat(link)  # follows the fd to the open inode, whatever path it has there
            except OSError:
                continue  # closed meanwhile, or a link to nothing
            if self._matches(info, wanted):
                try:
                    held.add(os.readlink(link))  # the path in the holder's mount namespace: a label only
                except OSError:
                    held.add(f"{os.major(info.st_rdev)}:{os.minor(info.st_rdev)}")
        readable = self._mapped(pid, wanted, files, held)
        return tuple(sorted(held)), readable

    @staticmethod
    def _matches(info: os.stat_result, wanted: _Wanted) -> bool:
        return (stat.S_ISCHR(info.st_mode) and info.st_rdev in wanted.rdevs) or (
            (info.st_dev, info.st_ino) in wanted.inodes)

    def _mapped(self, pid: int, wanted: _Wanted, files: dict[tuple[str, str], bool], held: set[str]) -> bool:
        """Add the device's nodes ``pid`` has mapped (``maps`` + ``map_files``) to ``held``; False: unreadable.

        proc(5) ``maps``: ``address perms offset dev inode pathname``; ``dev`` (hex major:minor) and
        ``inode`` are the mapped file's filesystem and inode, so the file's own ``st_rdev`` comes from
        following ``map_files/<start>-<end>`` (named without leading zeros). One stat per distinct
        file per scan (``files``); anonymous mappings (inode 0) are skipped.
        """
        try:
            with open(f"{self._root_text}/{pid}/maps", encoding="utf-8", errors="replace") as handle:
                lines = handle.readlines()
        except PermissionError:
            return False
        except OSError:
            return True  # ENOENT/ESRCH: it exited (or, on a test's fake proc root, has no maps)
        maps_dir = f"{self._root_text}/{pid}/map_files"
        for line in lines:
            fields = line.split(None, 5)
            if len(fields) < 5 or fields[4] == "0":
                continue
            key = (fields[3], fields[4])  # "dev inode" as maps prints them: the same text for the same file
            known = files.get(key)
            if known is None:
                start, _, end = fields[0].partition("-")
                try:
                    info = os.stat(f"{maps_dir}/{int(start, 16):x}-{int(end, 16):x}")
                except PermissionError:
                    return False  # map_files not ours to follow: cannot be ruled out
                except (OSError, ValueError):
                    continue  # unmapped meanwhile (or a line that is not a mapping)
                files[key] = known = self._matches(info, wanted)
            if known:
                label = fields[5].strip() if len(fields) > 5 else fields[3]
                held.add(f"{label} (mmap)")
        return True

    def _no_files(self, pid: int) -> bool:
        """A zombie/dead task or a kernel thread, from ``stat`` (readable by all): it holds no file."""
        try:
            text = (self._root / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
            fields = text.rpartition(")")[2].split()
            state, flags = fields[0], int(fields[6])  # proc(5): (3) state ... (9) flags
        except (OSError, IndexError, ValueError):
            return False
        return state in ("Z", "X", "x") or bool(flags & _PF_KTHREAD)

    def _is_exempt(self, pid: int, exe: str | None) -> bool:
        """The executable and the owner of a rule; anything unreadable: not exempt (it counts)."""
        rules = [r for r in self._exempt if exe is not None and r.exe == exe]
        if not rules:
            return False
        owner = self._owners(pid)
        uids = self._uids(pid)
        for rule in rules:
            uid = 0 if rule.uid is None and rule.owner == "host-systemd-unit" else rule.uid
            if uid is not None and (uids is None or set(uids) != {uid}):
                continue
            if rule.owner == "host" and owner.kind == "host" and self._host_mounts(pid):
                return True
            if (rule.owner == "host-systemd-unit" and owner.kind == "host" and rule.unit is not None
                    and self._in_unit(pid, rule.unit) and self._host_ns(pid, "pid")):
                return True
            if rule.owner == "pod" and owner.kind == "pod" and owner.pod_uid is not None:
                name = self.pod_name(owner.pod_uid)
                if name is not None and name.partition("/")[0] in rule.namespaces:
                    return True
        return False

    def _in_unit(self, pid: int, unit: str) -> bool:
        """Whether every systemd line of ``cgroup`` (v2 ``0::``, v1 ``name=systemd``) is ``/system.slice/<unit>[/...]``.

        Only root on the host (systemd) places a process there: a pod's cgroups are under
        ``kubepods``, and a pod cannot leave its cgroup namespace without privileges tenants do
        not have. Leading ``..`` (the agent's own cgroup namespace) are dropped; nothing else may
        precede ``system.slice``. No systemd line, or an unreadable file: no.
        """
        try:
            text = (self._root / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
        found = False
        for line in text.splitlines():
            fields = line.split(":", 2)
            if len(fields) != 3 or not ((fields[0] == "0" and fields[1] == "") or fields[1] == "name=systemd"):
                continue
            parts = [p for p in fields[2].strip().split("/") if p]
            while parts and parts[0] == "..":
                parts.pop(0)
            if parts[:2] != ["system.slice", unit]:
                return False
            found = True
        return found

    def _host_ns(self, pid: int, kind: str) -> bool:
        """Whether ``pid`` is in PID 1's ``ns/<kind>`` namespace (the agent runs with hostPID); unreadable: no."""
        try:
            return os.readlink(f"{self._root}/{pid}/ns/{kind}") == os.readlink(f"{self._root}/1/ns/{kind}")
        except OSError:
            return False

    def _host_mounts(self, pid: int) -> bool:
        """Whether ``pid`` sees the host's files: its mount namespace is PID 1's (``ns/mnt``); unreadable: no.

        ``exe`` is the path in the process's *own* mount namespace: a container outside
        ``kubepods`` (the kubelet's ``cgroupsPerQOS: false``, a runtime started by hand) that
        ships a binary at ``/usr/bin/nvidia-persistenced`` names it like the host's daemon. Only
        in the host's mount namespace is that path the host's file.
        """
        return self._host_ns(pid, "mnt")

    def _exe(self, pid: int) -> str | None:
        try:
            return os.readlink(f"{self._root}/{pid}/exe")
        except OSError:
            return None

    def _uids(self, pid: int) -> tuple[int, int] | None:
        """(real, effective) uid from ``status``; None if unreadable."""
        try:
            text = (self._root / str(pid) / "status").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("Uid:"):
                values = line.split()[1:3]
                if len(values) == 2 and all(v.isdigit() for v in values):
                    return int(values[0]), int(values[1])
        return None

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
