"""Who owns a GPU process: the pod (UID, container) from ``/proc/<pid>/cgroup``, the host, or unknown.

The barrier signals only processes whose pod UID is one of the released claim's pods
(``status.reservedFor``); every other process with a context is reported, never signalled.
NVML's process lists are host-wide PIDs without any pod identity, so the cgroup is the one
source: the kubelet puts each pod's containers under a pod-level cgroup named after the pod UID
(kubernetes ``pkg/kubelet/cm/pod_container_manager_linux.go``: ``podCgroupNamePrefix = "pod"``,
under the QoS cgroups ``burstable`` / ``besteffort`` of ``qos_container_manager_linux.go``;
Guaranteed pods sit directly under ``kubepods``). With the ``cgroupfs`` driver that is
``/kubepods[/burstable|/besteffort]/pod<uid>/<container id>``. With the ``systemd`` driver
``cgroup_manager_linux.go`` (``ConvertCgroupNameToSystemd``, ``escapeSystemdCgroupName``) joins
the path into slice names and replaces ``-`` by ``_`` in each part:
``/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/``
followed by the runtime's scope, ``cri-containerd-<id>.scope``, ``crio-<id>.scope`` or
``docker-<id>.scope``. cgroup v2 has one line ``0::<path>``, v1 one line per hierarchy
``<id>:<controllers>:<path>``. Under a private cgroup namespace (the agent's own container) the
path of another pod's process is shown relative to the agent's root (``/../../kubepods-...``), so
the pod is recognised by its own path segment, wherever it is.

Fail closed: an unreadable file, no kubelet pod segment under a ``kubepods`` path, or lines that
name different pods give ``unknown``; no ``kubepods`` anywhere gives ``host``. Neither is ever
signalled; only the owner's report differs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Owner", "ProcOwners", "parse_cgroup"]

#: systemd driver pod slice: ``kubepods-pod<uid>.slice``, ``kubepods-burstable-pod<uid>.slice`` ...
_SYSTEMD_POD = re.compile(r"^kubepods(?:-burstable|-besteffort)?-pod([0-9a-fA-F_]+)\.slice$")
#: cgroupfs driver pod directory: ``pod<uid>`` (a UUID, or a static pod's hex config hash).
_CGROUPFS_POD = re.compile(r"^pod([0-9a-fA-F][0-9a-fA-F-]*)$")
#: The container's scope (systemd) or directory (cgroupfs: the bare container id).
_SCOPE = re.compile(r"^(?:cri-containerd|crio|docker)-([0-9a-fA-F]+)\.scope$")
_CONTAINER_ID = re.compile(r"^[0-9a-fA-F]{12,}$")


@dataclass(frozen=True)
class Owner:
    """The owner of one process: ``pod`` (with its UID), ``host`` or ``unknown`` (why in ``detail``)."""

    kind: Literal["pod", "host", "unknown"]
    pod_uid: str | None = None
    container: str | None = None
    detail: str = ""

    def describe(self, pod_name: Callable[[str], str | None] | None = None) -> str:
        """``pod team-a/server (uid ...)``, ``host (<cgroup>)`` or ``unknown (<why>)``."""
        if self.kind == "pod":
            name = pod_name(str(self.pod_uid)) if pod_name is not None else None
            return f"pod {name} (uid {self.pod_uid})" if name else f"pod uid {self.pod_uid}"
        return f"{self.kind} ({self.detail})" if self.detail else self.kind


def _pod_of(path: str) -> tuple[str | None, str | None, bool]:
    """(pod uid, container id, under kubepods) of one cgroup path."""
    parts = [p for p in path.split("/") if p and p != ".."]
    kube = any(p == "kubepods" or p.startswith("kubepods.") or p.startswith("kubepods-") for p in parts)
    for index, part in enumerate(parts):
        systemd = _SYSTEMD_POD.match(part)
        uid = systemd.group(1).replace("_", "-") if systemd else None
        if uid is None:
            cgroupfs = _CGROUPFS_POD.match(part)
            uid = cgroupfs.group(1) if cgroupfs else None
        if uid is None:
            continue
        container = None
        if index + 1 < len(parts):
            scope = _SCOPE.match(parts[index + 1])
            if scope:
                container = scope.group(1)
            elif _CONTAINER_ID.match(parts[index + 1]):
                container = parts[index + 1]
        return uid.lower(), container, True
    return None, None, kube


def parse_cgroup(text: str) -> Owner:
    """The owner named by the contents of a ``/proc/<pid>/cgroup`` file (v1 or v2)."""
    pods: set[tuple[str, str | None]] = set()
    paths = []
    kube = False
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        path = fields[2].strip()
        paths.append(path)
        uid, container, under = _pod_of(path)
        kube = kube or under
        if uid is not None:
            pods.add((uid, container))
    if not paths:
        return Owner("unknown", detail="no cgroup line")
    uids = {uid for uid, _ in pods}
    if len(uids) > 1:
        return Owner("unknown", detail=f"lines name different pods: {', '.join(sorted(uids))}")
    if uids:
        uid = uids.pop()
        containers = sorted({c for _, c in pods if c})
        return Owner("pod", uid, containers[0] if len(containers) == 1 else None, paths[0])
    if kube:
        return Owner("unknown", detail=f"under kubepods but no pod cgroup: {paths[0]}")
    return Owner("host", detail=paths[0])


#: ``parse_cgroup`` memoized: the drain asks for every listed PID's owner at every poll, and a
#: container's processes share one text. Owners are frozen; 1,024 texts are a few hundred KB at most.
_parse_cached = functools.lru_cache(maxsize=1024)(parse_cgroup)


class ProcOwners:
    """Owners read from ``<proc_root>/<pid>/cgroup``; ``read`` replaces the file read (simulated node)."""

    def __init__(self, proc_root: str | Path = "/proc", read: Callable[[int], str | None] | None = None) -> None:
        self._root = Path(proc_root)
        self._read = read

    def __call__(self, pid: int) -> Owner:
        """The owner of ``pid`` now; ``unknown`` if its cgroup cannot be read."""
        if self._read is not None:
            text = self._read(pid)
            if text is None:
                return Owner("unknown", detail=f"no cgroup for pid {pid}")
            return _parse_cached(text)
        try:
            text = (self._root / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            return Owner("unknown", detail=f"cannot read {self._root / str(pid) / 'cgroup'}: {error.strerror}")
        return _parse_cached(text)
