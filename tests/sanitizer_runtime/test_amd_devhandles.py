"""The AMD device-handle scan (:mod:`dra_constructs.agent.devhandles_amd`) on a fake proc_root.

Device numbers as amdgpu gives them: ``/dev/dri/renderD<N>`` is ``226:N`` and ``/dev/dri/card<M>``
``226:M`` (DRM_MAJOR; ``drm_render`` / ``drm_card`` of amdsmi.h ``amdsmi_enumeration_info_t``:
"the render node under /sys/class/drm/renderD*", "the graphic card device under
/sys/class/drm/card*"), ``/dev/kfd`` ``<kfd major>:0`` with the major from ``<proc_root>/devices``.
Two CPX partitions of one MI300X: gpu-1-129 (card1, renderD129) and gpu-2-130 (card2, renderD130).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dra_constructs.agent.backends.base import BackendError
from dra_constructs.agent.devhandles_amd import AmdDeviceHandles
from dra_constructs.agent.devices import DeviceInfo

from .standin_amd import KFD_MAJOR, PROC_DEVICES, kfd_node
from .test_devhandles import HOST, chardev, host_init, maps, proc

P0 = DeviceInfo("gpu-1-129", "uuid-p0", 1, 24 << 30)
P1 = DeviceInfo("gpu-2-130", "uuid-p1", 2, 24 << 30)
MINORS = {"uuid-p0": (1, 129), "uuid-p1": (2, 130)}
NODES: dict[str, int | None] = {"uuid-p0": 2, "uuid-p1": 3}  # amdsmi_kfd_info_t.node_id (node 0, 1: CPUs)


def minors(device: DeviceInfo) -> tuple[int, int]:
    """What AmdSmiDevices.drm_minors answers: (drm_card, drm_render) of the enumeration info."""
    try:
        return MINORS[device.uuid]
    except KeyError:
        raise BackendError("amdsmi_get_processor_handles", f"{device.name} is not listed by amd-smi",
                           fatal=True) from None


def nodes(device: DeviceInfo) -> int | None:
    """What AmdSmiDevices.kfd_node answers: ``node_id`` of ``amdsmi_get_gpu_kfd_info``."""
    return NODES.get(device.uuid)


@pytest.fixture
def dev(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "devices").write_text(PROC_DEVICES)
    kfd_node(tmp_path / "sys", 2, 129)
    kfd_node(tmp_path / "sys", 3, 130)
    numbers = {"kfd": (KFD_MAJOR, 0), "dri/renderD129": (226, 129), "dri/renderD130": (226, 130),
               "dri/card1": (226, 1), "dri/card2": (226, 2)}
    return {name: chardev(tmp_path / "dev" / name, *number) for name, number in numbers.items()}


def scanner(root: Path) -> AmdDeviceHandles:
    return AmdDeviceHandles(minors, nodes, root, root.parent / "sys", self_pid=99, owners=lambda _pid: HOST)


def test_a_partition_is_held_through_its_own_render_and_card_nodes(tmp_path: Path, dev: dict[str, str]) -> None:
    root = tmp_path / "proc"
    host_init(root)
    proc(root, 200, dev["dri/renderD130"])  # partition 1's render node
    proc(root, 201, dev["dri/card1"])  # partition 0's card node
    elsewhere = chardev(tmp_path / "ctr-rootfs" / "dev" / "dri" / "renderD128", 226, 129)  # renamed in a container
    proc(root, 203, elsewhere)
    scan = scanner(root).scan(P0)
    assert scan.nodes == ("/dev/dri/renderD129", "/dev/dri/card1", "/dev/kfd")
    assert scan.devices == ("226:129", "226:1", f"{KFD_MAJOR}:0") and scan.problem is None
    assert sorted((h.pid, h.paths) for h in scan.holders) == [(201, (dev["dri/card1"],)), (203, (elsewhere,))]
    assert [h.pid for h in scanner(root).scan(P1).holders] == [200]  # the sibling partition's holder only


def test_a_kfd_holder_holds_every_amd_device_of_the_node(tmp_path: Path, dev: dict[str, str]) -> None:
    """KFD keeps the render file of ACQUIRE_VM after the process closes its fd: /dev/kfd alone may use any GPU."""
    root = tmp_path / "proc"
    host_init(root)
    proc(root, 300, dev["kfd"])  # no render fd left
    proc(root, 301, dev["kfd"], dev["dri/renderD130"])  # a ROCm process on partition 1: kfd + its render node
    proc(root, 302, dev["kfd"], comm="python3")  # the agent's HIP worker of another partition
    (root / "302" / "stat").write_text("302 (python3) S 99 302 1 0 -1\n")
    for device in (P0, P1):
        scan = scanner(root).scan(device)
        assert sorted(h.pid for h in scan.holders) == [300, 301] and [h.pid for h in scan.exempt] == [302]
    held = {h.pid: h.paths for h in scanner(root).scan(P0).holders}
    assert held[300] == (dev["kfd"],) and held[301] == (dev["kfd"],)  # labels: what it holds of *this* device


def test_a_mapping_of_the_render_node_holds_it_without_an_fd(tmp_path: Path, dev: dict[str, str]) -> None:
    root = tmp_path / "proc"
    proc(root, 400)
    maps(root, 400, ("7f0000000000-7f0000200000", dev["dri/renderD129"]))
    assert [(h.pid, h.paths) for h in scanner(root).scan(P0).holders] == [
        (400, (f"{dev['dri/renderD129']} (mmap)",))]
    assert scanner(root).scan(P1).holders == []


def test_without_the_kfd_loaded_only_the_drm_nodes_are_matched(tmp_path: Path, dev: dict[str, str]) -> None:
    root = tmp_path / "proc"
    (root / "devices").write_text("Character devices:\n226 drm\n")  # no kfd: no /dev/kfd can be open
    proc(root, 500, dev["kfd"])
    scan = scanner(root).scan(P0)
    assert scan.nodes == ("/dev/dri/renderD129", "/dev/dri/card1") and scan.holders == [] and not scan.failed


@pytest.mark.parametrize(("case", "problem"), [
    ("no /proc/devices", "the kfd major is unknown"),
    ("not listed by amd-smi", "DRM nodes of gpu-9-137 are unknown"),
    ("no render node", "not a DRM render minor"),
    ("the KFD binds another render node", "drm_render_minor 130, AMD SMI says renderD129"),
    ("no KFD node", "AMD SMI gives no KFD node"),
    ("no topology node", "cannot be checked"),
])
def test_a_device_whose_nodes_cannot_be_matched_fails_the_scan(tmp_path: Path, dev: dict[str, str], case: str,
                                                               problem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "proc"
    proc(root, 600, dev["kfd"])
    device = P0
    if case == "no /proc/devices":
        (root / "devices").unlink()
    elif case == "not listed by amd-smi":
        device = DeviceInfo("gpu-9-137", "uuid-gone", 9, 1)
    elif case == "no render node":
        monkeypatch.setitem(MINORS, "uuid-none", (3, 0))  # drm_render 0: amd-smi found no render node for it
        device = DeviceInfo("gpu-3-0", "uuid-none", 3, 1)
    elif case == "the KFD binds another render node":
        monkeypatch.setitem(NODES, "uuid-p0", 3)  # amd-smi maps the partition to the sibling's KFD node
    elif case == "no KFD node":
        monkeypatch.setitem(NODES, "uuid-p0", None)
    else:
        monkeypatch.setitem(NODES, "uuid-p0", 7)
    scan = scanner(root).scan(device)
    assert scan.failed and problem in str(scan.problem) and scan.holders == []
