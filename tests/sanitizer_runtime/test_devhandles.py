"""The ``/proc/*/fd`` scan of :mod:`dra_constructs.agent.devhandles` on a fake proc_root (real symlinks)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dra_constructs.agent import devhandles
from dra_constructs.agent.devhandles import DeviceHandles, cap_minor
from dra_constructs.agent.devices import DeviceInfo

GPU0 = DeviceInfo("gpu-0", "GPU-a", 0, 80 << 30)
MIG = DeviceInfo("gpu-0-mig-1g10gb-19-0", "MIG-a", 0, 10 << 30, parent_uuid="GPU-a", mig_profile="1g.10gb",
                 gpu_instance_id=1, compute_instance_ids=(0,))


def proc(root: Path, pid: int, *targets: str, comm: str = "python3", cmdline: str = "") -> Path:
    """``<root>/<pid>/fd/<n> -> target`` symlinks (readlink shows the target as /proc does), and comm."""
    fd = root / str(pid) / "fd"
    fd.mkdir(parents=True)
    for number, target in enumerate(targets, start=3):
        os.symlink(target, fd / str(number))
    (root / str(pid) / "comm").write_text(comm + "\n")
    if cmdline:
        (root / str(pid) / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
    return fd


def caps(root: Path, name: str, minor: int) -> None:
    """A MIG capability ``access`` file as the driver writes it (MIG User Guide, "Device Nodes and Capabilities")."""
    access = root / "driver/nvidia/capabilities" / name
    access.parent.mkdir(parents=True, exist_ok=True)
    access.write_text(f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")


def test_a_gpu_node_holder_counts_and_nvidiactl_uvm_alone_do_not(tmp_path: Path) -> None:
    proc(tmp_path, 100, "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0", "pipe:[123]")
    proc(tmp_path, 101, "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")  # every CUDA process
    proc(tmp_path, 102, "/dev/nvidiactl", "/dev/nvidia1")  # another GPU
    proc(tmp_path, 103, "/dev/nvidia0", comm="nvidia-persiste")  # NVML-only monitor: exempt, listed
    proc(tmp_path, 104, "/dev/nvidia0")  # the agent itself
    proc(tmp_path, 105, "/dev/nvidia0", comm="python3")  # the agent's fill worker of another device
    (tmp_path / "105" / "stat").write_text("105 (py thon) S 104 105 1 0 -1\n")
    (tmp_path / "100" / "stat").write_text("100 (python3) S 1 100 1 0 -1\n")
    (tmp_path / "self").mkdir()
    scan = DeviceHandles(tmp_path, self_pid=104).scan(GPU0)
    assert scan.nodes == ("/dev/nvidia0",)
    assert [(h.pid, h.paths) for h in scan.holders] == [(100, ("/dev/nvidia0",))]
    assert sorted(h.pid for h in scan.exempt) == [103, 105] and scan.scanned == 5 and scan.problem is None


def test_mps_daemons_are_named_by_argv0(tmp_path: Path) -> None:
    proc(tmp_path, 200, "/dev/nvidia0", comm="nvidia-cuda-mps", cmdline="/usr/bin/nvidia-cuda-mps-server")
    proc(tmp_path, 201, "/dev/nvidia0", comm="nvidia-cuda-mps", cmdline="nvidia-cuda-mps-control -d")
    holders = DeviceHandles(tmp_path, self_pid=1).scan(GPU0).holders
    assert {h.pid: h.mps for h in holders} == {200: "mps-server", 201: "mps-control"}


def test_mig_counts_its_capability_nodes_not_the_parent_node(tmp_path: Path) -> None:
    caps(tmp_path, "gpu0/mig/gi1/access", 12)
    caps(tmp_path, "gpu0/mig/gi1/ci0/access", 13)
    caps(tmp_path, "gpu0/mig/gi2/access", 21)
    proc(tmp_path, 300, "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12")
    proc(tmp_path, 301, "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap13")
    proc(tmp_path, 302, "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21")  # the tenant of gi2
    proc(tmp_path, 303, "/dev/nvidia0")  # a parent-wide handle: not this instance's
    proc(tmp_path, 304, "/proc/driver/nvidia/capabilities/gpu0/mig/gi1/access")  # /proc-based capability mode
    scan = DeviceHandles(tmp_path, self_pid=1).scan(MIG)
    assert "/dev/nvidia0" not in scan.nodes and "/dev/nvidia-caps/nvidia-cap12" in scan.nodes
    assert {h.pid for h in scan.holders} == {300, 301, 304}


def test_mig_without_capability_files_says_so(tmp_path: Path) -> None:
    proc(tmp_path, 300, "/dev/nvidia-caps/nvidia-cap12")
    scan = DeviceHandles(tmp_path, self_pid=1).scan(MIG)
    assert scan.holders == [] and scan.problem is not None and "gi1/access" in scan.problem
    unknown = DeviceHandles(tmp_path, self_pid=1).scan(
        DeviceInfo("gpu-0-mig-x", "MIG-b", 0, 1, parent_uuid="GPU-a"))
    assert "GPU instance id is not known" in (unknown.problem or "")


@pytest.mark.parametrize(("text", "minor"), [("DeviceFileMinor: 12\nDeviceFileMode: 292\n", 12),
                                             ("DeviceFileMode: 292\n", None), ("DeviceFileMinor: x\n", None)])
def test_cap_minor(text: str, minor: int | None) -> None:
    assert cap_minor(text) == minor


def test_unreadable_fd_dirs_are_unknown_and_do_not_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc(tmp_path, 400, "/dev/nvidia0")
    proc(tmp_path, 401, "/dev/nvidia0")
    real = os.listdir

    def listdir(path: str | Path) -> list[str]:
        if str(path) == str(tmp_path / "401" / "fd"):  # EACCES as without CAP_SYS_PTRACE (tests run as root)
            raise PermissionError(13, "Permission denied")
        if str(path) == str(tmp_path / "402" / "fd"):
            raise FileNotFoundError(2, "gone")
        return real(path)

    (tmp_path / "402").mkdir()  # exited between the listing and its fd read: gone, not unknown
    monkeypatch.setattr(devhandles.os, "listdir", listdir)
    scan = DeviceHandles(tmp_path, self_pid=1).scan(GPU0)
    assert [h.pid for h in scan.holders] == [400] and scan.unreadable == [401]
    assert scan.summary()["unreadable"] == 1 and scan.summary()["unreadable_pids"] == [401]


def test_one_scan_of_2000_pids_is_bounded(tmp_path: Path) -> None:
    """2,000 fake PIDs with 8 fds each (the CUDA set plus files); one holder of gpu-0."""
    for pid in range(1000, 3000):
        proc(tmp_path, pid, "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/null", "pipe:[1]", "socket:[2]",
             f"/var/log/{pid}.log", "anon_inode:[eventfd]", "/dev/nvidia0" if pid == 2999 else "/dev/nvidia1")
    handles = DeviceHandles(tmp_path, self_pid=1)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        scan = handles.scan(GPU0)
        best = min(best, time.perf_counter() - start)
    print(f"\n/proc scan: 2000 pids x 8 fds: best of 3 {best * 1000:.1f} ms")
    assert [h.pid for h in scan.holders] == [2999] and scan.scanned == 2000
    assert best < 2.0  # a drain poll is 0.5 s by default; measured ~50-100 ms on a shared 2-core VM
