"""The ``/proc/*/fd`` scan of :mod:`dra_constructs.agent.devhandles` on a fake proc_root (real symlinks).

The fd links point at real character device nodes made with ``mknod`` under ``tmp_path`` (the
numbers the NVIDIA driver uses: ``195:<minor>``, ``nvidia-caps`` from ``<proc_root>/devices``):
the scan follows the link to the inode (``os.stat``), as ``/proc/<pid>/fd/<n>`` does.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dra_constructs.agent import devhandles
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.devhandles import DeviceHandles, ExemptRule, cap_minor, char_majors
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.owners import Owner

from .standin import CAPS_MAJOR, PROC_DEVICES

GPU0 = DeviceInfo("gpu-0", "GPU-a", 0, 80 << 30)
MIG = DeviceInfo("gpu-0-mig-1g10gb-19-0", "MIG-a", 0, 10 << 30, parent_uuid="GPU-a", mig_profile="1g.10gb",
                 gpu_instance_id=1, compute_instance_ids=(0,))


def chardev(path: Path, major: int, minor: int) -> str:
    """A character device node ``major:minor`` at ``path`` (needs CAP_MKNOD: the tests run as root)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(major, minor))
    return str(path)


@pytest.fixture
def dev(tmp_path: Path) -> dict[str, str]:
    """The host's /dev as the tests' processes see it: nvidia0, nvidia1, nvidiactl, nvidia-uvm, caps 12/13/21."""
    root = tmp_path / "dev"
    nodes = {"nvidia0": (195, 0), "nvidia1": (195, 1), "nvidiactl": (195, 255), "nvidia-uvm": (235, 0),
             "nvidia-uvm-tools": (235, 1), **{f"nvidia-caps/nvidia-cap{m}": (CAPS_MAJOR, m) for m in (12, 13, 21)}}
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "devices").write_text(PROC_DEVICES)
    return {name: chardev(root / name, *number) for name, number in nodes.items()}


HOST_MNT = "mnt:[4026531841]"  # ``readlink /proc/<pid>/ns/mnt`` of the host's mount namespace


def proc(root: Path, pid: int, *targets: str, comm: str = "python3", cmdline: str = "", exe: str = "",
         mnt: str = HOST_MNT) -> Path:
    """``<root>/<pid>/fd/<n> -> target`` symlinks (os.stat follows them as it follows /proc's), comm, ns/mnt."""
    fd = root / str(pid) / "fd"
    fd.mkdir(parents=True)
    for number, target in enumerate(targets, start=3):
        os.symlink(target, fd / str(number))
    (root / str(pid) / "comm").write_text(comm + "\n")
    if cmdline:
        (root / str(pid) / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")
    if exe:
        os.symlink(exe, root / str(pid) / "exe")
    (root / str(pid) / "ns").mkdir()
    os.symlink(mnt, root / str(pid) / "ns" / "mnt")
    return fd


def host_init(root: Path) -> None:
    """PID 1, the host's init: its ``ns/mnt`` is the host's mount namespace (no fds on a GPU)."""
    proc(root, 1, comm="systemd", exe="/usr/lib/systemd/systemd")


def caps(root: Path, name: str, minor: int) -> Path:
    """A MIG capability ``access`` file as the driver writes it (MIG User Guide, "Device Nodes and Capabilities")."""
    access = root / "driver/nvidia/capabilities" / name
    access.parent.mkdir(parents=True, exist_ok=True)
    access.write_text(f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    return access


HOST = Owner("host", detail="/system.slice/x.service")


def test_a_gpu_node_holder_counts_and_nvidiactl_uvm_alone_do_not(tmp_path: Path, dev: dict[str, str]) -> None:
    root = tmp_path / "proc"
    proc(root, 100, dev["nvidiactl"], dev["nvidia-uvm"], dev["nvidia0"], "pipe:[123]")
    proc(root, 101, dev["nvidiactl"], dev["nvidia-uvm"], dev["nvidia-uvm-tools"])  # every CUDA process
    proc(root, 102, dev["nvidiactl"], dev["nvidia1"])  # another GPU
    host_init(root)
    proc(root, 103, dev["nvidia0"], comm="nvidia-persiste", exe="/usr/bin/nvidia-persistenced")  # host monitor
    proc(root, 104, dev["nvidia0"])  # the agent itself
    proc(root, 105, dev["nvidia0"], comm="python3")  # the agent's fill worker of another device
    (root / "105" / "stat").write_text("105 (py thon) S 104 105 1 0 -1\n")
    (root / "100" / "stat").write_text("100 (python3) S 1 100 1 0 -1\n")
    (root / "self").mkdir()
    scan = DeviceHandles(root, self_pid=104, owners=lambda _pid: HOST).scan(GPU0)
    assert scan.nodes == ("/dev/nvidia0",) and scan.devices == ("195:0",)
    assert [(h.pid, h.paths) for h in scan.holders] == [(100, (dev["nvidia0"],))]
    assert sorted(h.pid for h in scan.exempt) == [103, 105] and scan.scanned == 6 and scan.problem is None


def test_the_node_is_matched_by_device_number_under_any_path(tmp_path: Path, dev: dict[str, str]) -> None:
    """Review finding 2: a container's runtime may mount /dev/nvidia0 anywhere in its mount namespace."""
    root = tmp_path / "proc"
    elsewhere = chardev(tmp_path / "ctr-rootfs" / "run" / "gpu-a", 195, 0)  # same node, another path
    decoy = tmp_path / "ctr-rootfs" / "dev" / "nvidia0"  # the right name, not a device
    decoy.parent.mkdir(parents=True)
    decoy.write_text("")
    proc(root, 110, elsewhere)
    proc(root, 111, str(decoy), dev["nvidia1"])
    scan = DeviceHandles(root, self_pid=1, owners=lambda _pid: HOST).scan(GPU0)
    assert [(h.pid, h.paths) for h in scan.holders] == [(110, (elsewhere,))]


def test_exemption_needs_the_executable_and_the_owner_not_the_comm(tmp_path: Path, dev: dict[str, str]) -> None:
    """Review finding 1: comm is the process's own choice; exe and the owner are not."""
    root = tmp_path / "proc"
    host_init(root)
    proc(root, 120, dev["nvidia0"], comm="nvidia-persiste")  # names itself a monitor: counts
    proc(root, 121, dev["nvidia0"], comm="nvidia-persiste", exe="/usr/bin/nvidia-persistenced")  # in a pod
    proc(root, 122, dev["nvidia0"], comm="x", exe="/usr/bin/nvidia-persistenced")  # a host process: exempt
    proc(root, 123, dev["nvidia0"], exe="/usr/bin/dcgm-exporter")  # pod in gpu-operator: exempt
    proc(root, 124, dev["nvidia0"], exe="/usr/bin/dcgm-exporter")  # pod in a tenant namespace: counts
    proc(root, 125, dev["nvidia0"], exe="/opt/monitor")  # a configured rule with a uid
    (root / "125" / "status").write_text("Name:\tmonitor\nUid:\t1000\t1000\t1000\t1000\n")
    proc(root, 126, dev["nvidia0"], exe="/opt/monitor")  # the same executable as root: counts
    (root / "126" / "status").write_text("Name:\tmonitor\nUid:\t0\t0\t0\t0\n")
    pods = {121: "u-tenant", 123: "u-dcgm", 124: "u-tenant"}
    names = {"u-dcgm": "gpu-operator/dcgm-exporter-x", "u-tenant": "team-a/job-0"}

    def owner(pid: int) -> Owner:
        return Owner("pod", pods[pid]) if pid in pods else HOST

    rules = [*devhandles.DEFAULT_EXEMPT, ExemptRule(exe="/opt/monitor", uid=1000)]
    scan = DeviceHandles(root, self_pid=1, owners=owner, exempt=rules, pod_name=names.get).scan(GPU0)
    assert sorted(h.pid for h in scan.exempt) == [122, 123, 125]
    assert sorted(h.pid for h in scan.holders) == [120, 121, 124, 126]
    assert {e["pid"]: e["exe"] for e in scan.summary()["exempt"]}[122] == "/usr/bin/nvidia-persistenced"  # type: ignore[index]


def test_a_host_rule_needs_the_host_mount_namespace(tmp_path: Path, dev: dict[str, str]) -> None:
    """``exe`` is a path in the process's own mount namespace: a container outside ``kubepods``
    (``cgroupsPerQOS: false``, a runtime started by hand) can ship ``/usr/bin/nvidia-persistenced``."""
    root = tmp_path / "proc"
    host_init(root)
    proc(root, 130, dev["nvidia0"], exe="/usr/bin/nvidia-persistenced")  # the host's daemon: exempt
    proc(root, 131, dev["nvidia0"], exe="/usr/bin/nvidia-persistenced", mnt="mnt:[4026532999]")  # a container
    proc(root, 132, dev["nvidia0"], exe="/usr/bin/nvidia-smi")
    (root / "132" / "ns" / "mnt").unlink()  # ns/mnt unreadable (gone, or not ours to read): not exempt
    scan = DeviceHandles(root, self_pid=2, owners=lambda _pid: HOST).scan(GPU0)
    assert [h.pid for h in scan.exempt] == [130]
    assert sorted(h.pid for h in scan.holders) == [131, 132]
    os.unlink(root / "1" / "ns" / "mnt")  # the host's own link unreadable: nothing is exempt
    scan = DeviceHandles(root, self_pid=2, owners=lambda _pid: HOST).scan(GPU0)
    assert scan.exempt == [] and sorted(h.pid for h in scan.holders) == [130, 131, 132]


def test_a_scan_that_cannot_list_the_proc_root_failed(tmp_path: Path) -> None:
    scan = DeviceHandles(tmp_path / "absent", self_pid=1).scan(GPU0)
    assert scan.failed and "cannot list" in (scan.problem or "") and scan.summary()["failed"] is True


def test_char_majors_reads_the_character_section_only() -> None:
    assert char_majors(PROC_DEVICES) == {"mem": 1, "/dev/vc/0": 4, "nvidia-frontend": 195, "nvidia-uvm": 235,
                                         "nvidia-caps": CAPS_MAJOR}


def test_mps_daemons_are_named_by_argv0(tmp_path: Path, dev: dict[str, str]) -> None:
    root = tmp_path / "proc"
    proc(root, 200, dev["nvidia0"], comm="nvidia-cuda-mps", cmdline="/usr/bin/nvidia-cuda-mps-server")
    proc(root, 201, dev["nvidia0"], comm="nvidia-cuda-mps", cmdline="nvidia-cuda-mps-control -d")
    holders = DeviceHandles(root, self_pid=1).scan(GPU0).holders
    assert {h.pid: h.mps for h in holders} == {200: "mps-server", 201: "mps-control"}


def test_mig_counts_its_capability_nodes_not_the_parent_node(tmp_path: Path, dev: dict[str, str]) -> None:
    root = tmp_path / "proc"
    gi1 = caps(root, "gpu0/mig/gi1/access", 12)
    caps(root, "gpu0/mig/gi1/ci0/access", 13)
    caps(root, "gpu0/mig/gi2/access", 21)
    proc(root, 300, dev["nvidiactl"], dev["nvidia0"], dev["nvidia-caps/nvidia-cap12"])
    proc(root, 301, dev["nvidia0"], dev["nvidia-caps/nvidia-cap13"])
    proc(root, 302, dev["nvidia0"], dev["nvidia-caps/nvidia-cap21"])  # the tenant of gi2
    proc(root, 303, dev["nvidia0"])  # a parent-wide handle: not this instance's
    proc(root, 304, str(gi1))  # /proc-based capability mode: the access file itself (by inode)
    scan = DeviceHandles(root, self_pid=1).scan(MIG)
    assert "/dev/nvidia0" not in scan.nodes and "/dev/nvidia-caps/nvidia-cap12" in scan.nodes
    assert f"{CAPS_MAJOR}:12" in scan.devices and scan.problem is None
    assert {h.pid for h in scan.holders} == {300, 301, 304}


def test_mig_without_capability_files_fails_closed(tmp_path: Path, dev: dict[str, str]) -> None:
    """Review finding 1: an unmapped capability node's holders are invisible: the scan refuses."""
    root = tmp_path / "proc"
    proc(root, 300, dev["nvidia-caps/nvidia-cap12"])
    scan = DeviceHandles(root, self_pid=1).scan(MIG)
    assert scan.holders == [] and scan.problem is not None and "gi1/access" in scan.problem and scan.failed
    caps(root, "gpu0/mig/gi1/access", 12)  # the GI's file, not the CI's: still not all mapped
    partial = DeviceHandles(root, self_pid=1).scan(MIG)
    assert partial.failed and "gi1/ci0/access" in (partial.problem or "") and [h.pid for h in partial.holders] == [300]
    caps(root, "gpu0/mig/gi1/ci0/access", 13)
    assert not DeviceHandles(root, self_pid=1).scan(MIG).failed
    unknown = DeviceHandles(root, self_pid=1).scan(
        DeviceInfo("gpu-0-mig-x", "MIG-b", 0, 1, parent_uuid="GPU-a"))
    assert "GPU instance id is not known" in (unknown.problem or "") and unknown.failed
    (root / "devices").write_text("Character devices:\n195 nvidia-frontend\n")  # no nvidia-caps major
    assert DeviceHandles(root, self_pid=1).scan(MIG).failed


@pytest.mark.parametrize(("text", "minor"), [("DeviceFileMinor: 12\nDeviceFileMode: 292\n", 12),
                                             ("DeviceFileMode: 292\n", None), ("DeviceFileMinor: x\n", None)])
def test_cap_minor(text: str, minor: int | None) -> None:
    assert cap_minor(text) == minor


def stat_line(pid: int, state: str = "S", flags: int = 0x400000, ppid: int = 7) -> str:
    """``/proc/<pid>/stat`` (proc(5)): pid (comm) state ppid pgrp session tty_nr tpgid flags ..."""
    return f"{pid} (a b) {state} {ppid} {pid} {pid} 0 -1 {flags} 0 0 0 0\n"


def test_unreadable_fd_dirs_block_unless_provably_no_holder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            dev: dict[str, str]) -> None:
    """Review finding 2: a process whose fds cannot be read may hold the device: the scan refuses.

    Provably no holder without its fds: a zombie (state Z) or a kernel thread (PF_KTHREAD in the
    flags), both from ``stat``, which proc(5) lets anyone read.
    """
    tmp_path = tmp_path / "proc"
    proc(tmp_path, 400, dev["nvidia0"])
    proc(tmp_path, 401, dev["nvidia0"])
    for pid, line in ((401, stat_line(401)), (403, stat_line(403, "Z")), (404, stat_line(404, flags=0x00208040))):
        (tmp_path / str(pid)).mkdir(exist_ok=True)
        (tmp_path / str(pid) / "stat").write_text(line)
    unreadable = {str(tmp_path / str(pid) / "fd") for pid in (401, 403, 404)}
    real = os.listdir

    def listdir(path: str | Path) -> list[str]:
        if str(path) in unreadable:  # EACCES as without CAP_SYS_PTRACE (tests run as root)
            raise PermissionError(13, "Permission denied")
        if str(path) == str(tmp_path / "402" / "fd"):
            raise FileNotFoundError(2, "gone")
        return real(path)

    (tmp_path / "402").mkdir()  # exited between the listing and its fd read: gone, not unknown
    monkeypatch.setattr(devhandles.os, "listdir", listdir)
    scan = DeviceHandles(tmp_path, self_pid=1).scan(GPU0)
    assert [h.pid for h in scan.holders] == [400] and scan.unreadable == [401]
    assert scan.failed and "pids 401;" in (scan.problem or "") and "may hold the device" in (scan.problem or "")
    assert scan.summary()["unreadable"] == 1 and scan.summary()["unreadable_pids"] == [401]
    unreadable.discard(str(tmp_path / "401" / "fd"))
    scan = DeviceHandles(tmp_path, self_pid=1).scan(GPU0)
    assert not scan.failed and scan.unreadable == [] and sorted(h.pid for h in scan.holders) == [400, 401]


def test_an_unreadable_exempt_process_does_not_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     dev: dict[str, str]) -> None:
    """An exempt rule proves it may hold the node: its unreadable fds (an LSM refusing them) do not block."""
    root = tmp_path / "proc"
    host_init(root)
    proc(root, 410, dev["nvidia0"], exe="/usr/bin/nvidia-persistenced")
    real = os.listdir
    monkeypatch.setattr(devhandles.os, "listdir", lambda path: (_ for _ in ()).throw(PermissionError(13, "denied"))
                        if str(path) == str(root / "410" / "fd") else real(path))
    scan = DeviceHandles(root, self_pid=2, owners=lambda _pid: HOST).scan(GPU0)
    assert not scan.failed and [(h.pid, h.paths) for h in scan.exempt] == [(410, ("fds or mappings unreadable",))]


def maps(root: Path, pid: int, *mappings: tuple[str, str]) -> None:
    """``<pid>/maps`` lines and ``map_files/<start>-<end>`` links for (range, target) pairs (proc(5)).

    The ``dev``/``inode`` columns are the mapped file's own ``st_dev``/``st_ino`` (its filesystem's
    device, not ``st_rdev``), as the kernel prints them (``show_map_vma``: ``%02x:%02x %lu``);
    ``maps`` pads addresses to 8 hex digits, ``map_files`` names them without leading zeros.
    """
    lines = ["00400000-00452000 r-xp 00000000 00:00 0 \n"]  # an anonymous mapping: inode 0, skipped
    (root / str(pid) / "map_files").mkdir(parents=True, exist_ok=True)
    for addresses, target in mappings:
        info = os.stat(target)
        lines.append(f"{addresses} rw-s 00000000 {os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x} "
                     f"{info.st_ino}                    {target}\n")
        start, end = (int(a, 16) for a in addresses.split("-"))
        os.symlink(target, root / str(pid) / "map_files" / f"{start:x}-{end:x}")
    (root / str(pid) / "maps").write_text("".join(lines))


def test_a_mapping_of_the_device_holds_it_without_an_fd(tmp_path: Path, dev: dict[str, str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Review finding 3: mmap the node, close the fd: the mapping still holds the device."""
    root = tmp_path / "proc"
    lib = tmp_path / "libcuda.so.1"
    lib.write_bytes(b"\x7fELF")
    proc(root, 500)  # no fd on the GPU: only its mapping
    maps(root, 500, ("7f0000000000-7f0000200000", dev["nvidia0"]), ("7f0000400000-7f0000600000", str(lib)))
    proc(root, 501, dev["nvidiactl"])
    maps(root, 501, ("7f1000000000-7f1000200000", dev["nvidia1"]), ("7f1000400000-7f1000600000", str(lib)))
    proc(root, 502)
    maps(root, 502, ("0a000000-0a200000", dev["nvidia0"]))  # the same file as 500's: one stat per scan
    followed: list[str] = []
    real = os.stat

    def counting(path: str | Path, *args: object, **kwargs: object) -> os.stat_result:
        if "/map_files/" in str(path):
            followed.append(str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(devhandles.os, "stat", counting)
    scan = DeviceHandles(root, self_pid=1).scan(GPU0)
    assert [(h.pid, h.paths) for h in scan.holders] == [(500, (f"{dev['nvidia0']} (mmap)",)),
                                                         (502, (f"{dev['nvidia0']} (mmap)",))]
    assert not scan.failed and len(followed) == 3  # nvidia0, the library, nvidia1: each file once


def test_unreadable_mappings_block(tmp_path: Path, dev: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``maps`` (ptrace read) or ``map_files`` (CAP_SYS_ADMIN, proc(5)) refused: the process may map the node."""
    root = tmp_path / "proc"
    proc(root, 510)
    maps(root, 510, ("7f0000000000-7f0000200000", dev["nvidia0"]))
    real = os.stat

    def refused(path: str | Path, *args: object, **kwargs: object) -> os.stat_result:
        if "/map_files/" in str(path):
            raise PermissionError(1, "Operation not permitted")
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(devhandles.os, "stat", refused)
    scan = DeviceHandles(root, self_pid=1).scan(GPU0)
    assert scan.failed and scan.unreadable == [510] and scan.holders == []
    monkeypatch.setattr(devhandles.os, "stat", real)
    (root / "510" / "maps").chmod(0)
    real_open = open

    def denied(path: str, *args: object, **kwargs: object) -> object:
        if str(path).endswith("/510/maps"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", denied)
    scan = DeviceHandles(root, self_pid=1).scan(GPU0)
    assert scan.failed and scan.unreadable == [510]


def test_one_scan_of_2000_pids_finds_the_one_holder(tmp_path: Path, dev: dict[str, str]) -> None:
    """2,000 fake PIDs with 8 fds each (the CUDA set plus files); one holder of gpu-0.

    Its cost is a benchmark (benchmarks/devhandles_scan.py), not a timed assertion here.
    """
    tmp_path = tmp_path / "proc"
    log = tmp_path / "app.log"
    log.write_text("")
    for pid in range(1000, 3000):
        proc(tmp_path, pid, dev["nvidiactl"], dev["nvidia-uvm"], "/dev/null", "pipe:[1]", "socket:[2]",
             str(log), "anon_inode:[eventfd]", dev["nvidia0"] if pid == 2999 else dev["nvidia1"])
    scan = DeviceHandles(tmp_path, self_pid=1).scan(GPU0)
    assert [h.pid for h in scan.holders] == [2999] and scan.scanned == 2000


def test_a_scan_that_cannot_run_is_a_warning_event_a_metric_and_refuses_the_release(tmp_path: Path) -> None:
    """Review finding 3: fail closed where the scan was required; retried until a scan runs."""
    from dra_constructs.agent.barrier import HANDLE_SCAN_FAILED
    from dra_constructs.agent.state import Phase

    from .conftest import SimEnv

    env = SimEnv(tmp_path / "sim", simulated=SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))
    assert not env.device.is_mig
    root = tmp_path / "proc-root"  # not there yet: the scan cannot list it
    env.rt.barrier.deps.device_handles = DeviceHandles(root, self_pid=1).scan
    record = env.rt.barrier.run(env.device, "startup-unknown")
    assert record.result == "quarantined" and (record.reason or "").startswith(HANDLE_SCAN_FAILED)
    assert record.device_handle_scan is not None and record.device_handle_scan["failed"] is True
    events = [e for e in env.kube.events if e["reason"] == "DeviceHandleScanFailed"]
    assert len(events) == 1 and events[0]["type"] == "Warning" and "release is refused" in events[0]["message"]
    assert b'dra_sanitizer_device_handle_scan_problems_total{outcome="failed"} 1.0' in env.rt.metrics.render()
    assert env.rt.barrier.recover(env.device) is None  # still cannot scan: stays guarded
    root.mkdir()
    released = env.rt.barrier.recover(env.device)  # the scan runs again: sanitized
    assert released is not None and released.result == "released", released and released.reason
    assert env.rt.barrier.deps.store.load(env.device.name).phase is Phase.CLEAN


HOST_PID = "pid:[4026531836]"


def unit_daemon(root: Path, pid: int, target: str, *, cgroup: str, uid: int = 0, pid_ns: str = HOST_PID,
                exe: str = "/usr/bin/nvidia-persistenced") -> None:
    """A host daemon under systemd with ``ProtectSystem=``: its own mount namespace, the host's PID namespace."""
    proc(root, pid, target, exe=exe, mnt="mnt:[4026532777]")
    os.symlink(pid_ns, root / str(pid) / "ns" / "pid")
    (root / str(pid) / "cgroup").write_text(cgroup)
    (root / str(pid) / "status").write_text(f"Name:\tnvidia-persiste\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")


def test_a_systemd_unit_rule_exempts_the_host_daemon_in_its_own_mount_namespace(
        tmp_path: Path, dev: dict[str, str]) -> None:
    """Review finding 6: ``ProtectSystem=`` gives the daemon its own mount namespace, so the host rule cannot
    match it; ``host-systemd-unit`` names it by its unit's cgroup, the host PID namespace and root."""
    from dra_constructs.agent.owners import ProcOwners

    root = tmp_path / "proc"
    host_init(root)
    os.symlink(HOST_PID, root / "1" / "ns" / "pid")
    unit = "0::/system.slice/nvidia-persistenced.service\n"
    unit_daemon(root, 600, dev["nvidia0"], cgroup=unit)  # the daemon: exempt by the unit rule only
    unit_daemon(root, 601, dev["nvidia0"], cgroup="0::/system.slice/other.service\n")  # another unit
    unit_daemon(root, 602, dev["nvidia0"], cgroup=unit, uid=1000)  # not root (the rule names no uid)
    unit_daemon(root, 603, dev["nvidia0"], cgroup=unit, pid_ns="pid:[4026532999]")  # its own PID namespace
    unit_daemon(root, 604, dev["nvidia0"], cgroup="0::/kubepods/burstable/pod1234/system.slice/"
                                                  "nvidia-persistenced.service\n")  # a pod's nested cgroup
    unit_daemon(root, 605, dev["nvidia0"], cgroup="12:devices:/system.slice/nvidia-persistenced.service\n"
                                                  "1:name=systemd:/system.slice/nvidia-persistenced.service\n"
                                                  "0::/system.slice/nvidia-persistenced.service\n")  # hybrid v1
    unit_daemon(root, 606, dev["nvidia0"], cgroup="0::/../../system.slice/nvidia-persistenced.service\n")  # cgroupns
    unit_daemon(root, 607, dev["nvidia0"], cgroup=unit, exe="/opt/other")  # the unit, another executable
    owners = ProcOwners(root)
    default = DeviceHandles(root, self_pid=2, owners=owners).scan(GPU0)
    assert default.exempt == [] and len(default.holders) == 8  # the host rule wants the host's mount namespace
    rule = ExemptRule(exe="/usr/bin/nvidia-persistenced", owner="host-systemd-unit",
                      unit="nvidia-persistenced.service")
    scan = DeviceHandles(root, self_pid=2, owners=owners, exempt=[*devhandles.DEFAULT_EXEMPT, rule]).scan(GPU0)
    assert sorted(h.pid for h in scan.exempt) == [600, 605, 606]
    assert sorted(h.pid for h in scan.holders) == [601, 602, 603, 604, 607]
    as_1000 = rule.model_copy(update={"uid": 1000})
    scan = DeviceHandles(root, self_pid=2, owners=owners, exempt=[as_1000]).scan(GPU0)
    assert [h.pid for h in scan.exempt] == [602]


@pytest.mark.parametrize(("fields", "problem"), [
    ({"owner": "host-systemd-unit"}, "needs the systemd unit"),
    ({"owner": "host-systemd-unit", "unit": "../kubepods"}, "needs the systemd unit"),
    ({"owner": "host-systemd-unit", "unit": "x.service", "exe": "nvidia-persistenced"}, "not an absolute path"),
    ({"owner": "host", "unit": "x.service"}, "only owner host-systemd-unit takes a unit"),
])
def test_a_systemd_unit_rule_is_checked(fields: dict[str, str], problem: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=problem):
        ExemptRule(**{"exe": "/usr/bin/nvidia-persistenced", **fields})  # type: ignore[arg-type]


def test_a_systemd_unit_rule_is_a_config_option(tmp_path: Path) -> None:
    from dra_constructs.agent.config import load_config
    from dra_constructs.errors import DraConstructsError

    path = tmp_path / "agent.yaml"
    path.write_text("node_name: node-a\ndevice_handles_exempt:\n- exe: /usr/bin/nvidia-persistenced\n"
                    "  owner: host-systemd-unit\n  unit: nvidia-persistenced.service\n")
    (rule,) = load_config(path).device_handles_exempt
    assert rule.owner == "host-systemd-unit" and rule.unit == "nvidia-persistenced.service" and rule.uid is None
    path.write_text("node_name: node-a\ndevice_handles_exempt:\n- exe: /usr/bin/nvidia-persistenced\n"
                    "  owner: host-systemd-unit\n")
    with pytest.raises(DraConstructsError, match=r"device_handles_exempt\.0.*needs the systemd unit"):
        load_config(path)


def test_a_failed_scan_still_drains_the_released_claims_own_processes(tmp_path: Path) -> None:
    """A failed scan refuses the release, but only after the claim's own processes are signalled.

    Before, the drain refused at its first poll: the claim's processes (known by their cgroups,
    not by the scan) kept running on a quarantined device, and the self-clearing retry waited for
    them to leave on their own.
    """
    import random

    from dra_constructs.agent.barrier import HANDLE_SCAN_FAILED
    from dra_constructs.agent.kube import Tenant

    from .conftest import SimEnv

    pod = "0c4e5f1a-7d2b-4c9e-9a41-5b7e2f3d8c10"
    tenant = Tenant("team-a/claim-1", "team-a", "uid-1", pods=(pod,))
    env = SimEnv(tmp_path / "sim", simulated=SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048))
    env.rt.barrier.run(env.device, "startup-unknown")
    env.rt.barrier.mark_allocated(env.device, tenant)
    pids = env.node.start_tenant(env.device.name, [("obey", 5.0)], random.Random(0), pod=pod)
    root = tmp_path / "proc-root"  # not there: every scan fails
    env.rt.barrier.deps.device_handles = DeviceHandles(root, self_pid=1).scan
    record = env.rt.barrier.run(env.device, "deallocated", tenant)
    assert record.pids_sigterm == pids  # the claim's own process was signalled and left
    assert record.result == "quarantined" and (record.reason or "").startswith(HANDLE_SCAN_FAILED)
    assert env.node.audit(env.device.name).live_contexts == 0
    root.mkdir()
    released = env.rt.barrier.recover(env.device)  # a scan that reads everything: sanitized
    assert released is not None and released.result == "released", released and released.reason
