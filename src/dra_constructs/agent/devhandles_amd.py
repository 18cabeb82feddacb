"""Processes holding an AMD GPU's or partition's nodes: ``/dev/kfd`` and its DRM render and card nodes.

The scan of :mod:`.devhandles` (one ``<proc_root>/*/fd`` + ``maps``/``map_files`` pass per poll,
matched on ``st_rdev``, the same exemptions and the same fail-closed rules for unreadable
processes) with the AMD device numbers instead of NVIDIA's:

- the device's **render node** ``/dev/dri/renderD<N>`` (char ``drm:N``, ``N`` 128-255) and its
  **card node** ``/dev/dri/card<M>`` (``drm:M``). ``N`` and ``M`` are ``drm_render`` and
  ``drm_card`` of ``amdsmi_get_gpu_enumeration_info`` (amdsmi.h ``amdsmi_enumeration_info_t``:
  "the render node under /sys/class/drm/renderD*", "the graphic card device under
  /sys/class/drm/card*"; ROCm 6.4+, the version :mod:`.backends.amd_smi` requires), the numbers
  the KFD topology gives as ``drm_render_minor`` in
  ``/sys/class/kfd/kfd/topology/nodes/<node>/properties`` and libhsakmt opens
  (``open_drm_render_device(drm_render_minor)``). Each compute partition (CPX/DPX/QPX) is its own
  processor with its own card and render node, so a partition is matched alone;
- ``/dev/kfd`` (char ``kfd:0``: one node for every GPU of the node). The ``drm`` and ``kfd``
  majors come from ``<proc_root>/devices`` (``kfd`` is dynamic; ``drm`` is ``DRM_MAJOR`` 226).

**A ``/dev/kfd`` holder counts as a holder of every AMD device on the node.** KFD binds a process
to a GPU with ``AMDKFD_IOC_ACQUIRE_VM`` on one of that GPU's render fds, and keeps its own
reference to that DRM file (``fget``) until the process ends: the process may close the render fd
afterwards and keep using the GPU through ``/dev/kfd`` alone, with nothing left in its fd table or
mappings that names the GPU. Only its device cgroup could prove it never opened this GPU's render
node, and cgroup v2 device rules are eBPF programs the agent cannot read. So a process holding
``/dev/kfd`` that is not exempt blocks the release like any holder: the released claim's own are
signalled by the drain, any other (a co-tenant on another partition, the host) is reported and
never signalled, and the device stays guarded until it is gone (fail closed; the cost, a release
waiting for other tenants' ROCm processes on the node, is in docs/amd.md). If ``<proc_root>/devices``
lists no ``kfd``, the KFD is not loaded and no such node can be open.

The render minor AMD SMI gives is checked against the KFD's own (``drm_render_minor`` of
``<sysfs_root>/class/kfd/kfd/topology/nodes/<node_id>/properties``, ``node_id`` from
``amdsmi_get_gpu_kfd_info``), where the KFD is loaded: the holders of the node the KFD binds are
the ones that matter, and a partition AMD SMI maps to another render node would be scanned for the
wrong holders.

Fail closed: an unreadable ``<proc_root>/devices`` (the ``kfd`` major unknown), a device AMD SMI
cannot map to its nodes, a render minor outside 128-255, or (KFD loaded) no KFD node, an unreadable
topology node or one naming another render minor fails the scan (the release is refused).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.devhandles import DEFAULT_EXEMPT, DeviceHandles, ExemptRule, _Wanted, char_majors
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.owners import Owner

__all__ = ["DRM_MAJOR", "KFD_LABEL", "AmdDeviceHandles"]

#: The DRM core's character major (``DRM_MAJOR``, Linux; listed as ``drm`` in ``/proc/devices``).
DRM_MAJOR = 226
#: libhsakmt's ``DRM_FIRST_RENDER_NODE`` / ``DRM_LAST_RENDER_NODE``: the render minors.
_RENDER_MINORS = range(128, 256)
#: The label of ``/dev/kfd`` in a scan's nodes (it stands for every GPU of the node).
KFD_LABEL = "/dev/kfd"
_NONE = _Wanted(frozenset(), frozenset(), (), ())


class AmdDeviceHandles(DeviceHandles):
    """The :class:`DeviceHandles` scan for AMD devices; ``drm_minors(device)`` gives (card, render) minors."""

    def __init__(self, drm_minors: Callable[[DeviceInfo], tuple[int, int]],
                 kfd_node: Callable[[DeviceInfo], int | None], proc_root: str | Path = "/proc",
                 sysfs_root: str | Path = "/sys", exempt: Iterable[ExemptRule] = DEFAULT_EXEMPT,
                 self_pid: int | None = None, owners: Callable[[int], Owner] | None = None,
                 pod_name: Callable[[str], str | None] = lambda _uid: None) -> None:
        super().__init__(proc_root, exempt=exempt, self_pid=self_pid, owners=owners, pod_name=pod_name)
        self._drm_minors = drm_minors
        self._kfd_node = kfd_node
        self._topology = Path(sysfs_root) / "class/kfd/kfd/topology/nodes"

    def _topology_problem(self, device: DeviceInfo, render: int) -> str | None:
        """Why the KFD's render minor of ``device`` is not AMD SMI's ``render`` (None: it is)."""
        try:
            node = self._kfd_node(device)
        except BackendError as error:
            return f"the KFD node of {device.name} is unknown ({error})"
        if node is None:
            return f"AMD SMI gives no KFD node for {device.name}: its render node cannot be checked"
        properties = self._topology / str(node) / "properties"
        try:
            text = properties.read_text(encoding="ascii", errors="replace")
        except OSError as error:
            return f"{properties}: {error.strerror}: the render node of {device.name} cannot be checked"
        for line in text.splitlines():  # kfd_topology.c node_show: "<name> <value>" per line
            name, _, value = line.partition(" ")
            if name == "drm_render_minor":
                if value.strip() != str(render):
                    return (f"{properties} says drm_render_minor {value.strip()}, AMD SMI says renderD{render} "
                            f"for {device.name}")
                return None
        return f"{properties} has no drm_render_minor"

    def _wanted(self, device: DeviceInfo) -> tuple[_Wanted, str | None]:
        devices = self._root / "devices"
        try:
            majors = char_majors(devices.read_text(encoding="utf-8", errors="replace"))
        except OSError as error:
            return _NONE, f"{devices}: {error.strerror}: the kfd major is unknown, /dev/kfd holders cannot be matched"
        try:
            card, render = self._drm_minors(device)
        except BackendError as error:
            return _NONE, f"the DRM nodes of {device.name} are unknown ({error})"
        if render not in _RENDER_MINORS or card < 0:
            return _NONE, (f"AMD SMI gives {device.name} render node {render} and card {card}: not a DRM render "
                           f"minor (128-255), its holders cannot be matched")
        drm = majors.get("drm", DRM_MAJOR)
        rdevs = {os.makedev(drm, render), os.makedev(drm, card)}
        labels = [f"/dev/dri/renderD{render}", f"/dev/dri/card{card}"]
        numbers = [f"{drm}:{render}", f"{drm}:{card}"]
        kfd = majors.get("kfd")
        if kfd is not None:  # minor 0: kfd_chardev_init's device_create(..., MKDEV(kfd_char_dev_major, 0), ...)
            problem = self._topology_problem(device, render)
            if problem is not None:
                return _NONE, problem
            rdevs.add(os.makedev(kfd, 0))
            labels.append(KFD_LABEL)
            numbers.append(f"{kfd}:0")
        return _Wanted(frozenset(rdevs), frozenset(), tuple(labels), tuple(numbers)), None
