"""Drain beyond NVML's lists on the stand-in driver (issue 23 item 4): real processes, real signals.

Each holder is a real child process without a context (NVML does not list it). Under the agent's
``proc_root`` it writes ``<its pid>/fd/<n> -> <node>`` as ``/proc`` shows an open device node and
removes them when SIGTERM ends it (the fd goes with the process), beside the ``<pid>/cgroup`` of
its pod (``standin.cgroup``) or of the host. The links point at real character device nodes with
the driver's numbers (``195:<minor>``; ``nvidia-caps`` from ``<proc_root>/devices``), made with
``mknod`` under the node's ``dev/`` (the tests run as root): the scan matches the device number.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import Runtime
from dra_constructs.agent.state import Phase

from .standin import CAPS_MAJOR, CI, GI, GPU, MiB, Node, cgroup
from .test_devhandles import chardev
from .test_standin_backends import POD, MakeNode, a100_mig, runtime, standin  # noqa: F401 - fixture

OTHER = "7d0e1f2a-3b4c-4d5e-8f60-718293a4b5c6"
_HOLDER = """
import os, shutil, signal, sys, time
fd = os.path.join(sys.argv[1], str(os.getpid()), "fd")
os.makedirs(fd, exist_ok=True)
for n, target in enumerate(sys.argv[2:], start=3):
    os.symlink(target, os.path.join(fd, str(n)))
def bye(*_):
    shutil.rmtree(fd, ignore_errors=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, bye)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def dev(node: Node, name: str) -> str:
    """The node's ``/dev/<name>`` as a real character device with the driver's numbers."""
    numbers = {"nvidia0": (195, 0), "nvidia1": (195, 1), "nvidiactl": (195, 255), "nvidia-uvm": (235, 0),
               **{f"nvidia-caps/nvidia-cap{m}": (CAPS_MAJOR, m) for m in (12, 13)}}
    return chardev(node.root / "dev" / name, *numbers[name])


class Holder:
    """A real process holding ``targets`` open (its fd symlinks under proc_root), in ``pod`` (None: host)."""

    def __init__(self, node: Node, *targets: str, pod: str | None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(node.proc_root), *targets],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().startswith("ready")
        self.dir = node.proc_root / str(self.proc.pid)
        if pod is not None:
            cgroup(node, self.proc.pid, pod)
        else:
            (self.dir / "cgroup").write_text("0::/system.slice/nvidia-tool.service\n")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir / "fd", ignore_errors=True)  # the fds go with the process
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for holder in made:
        holder.stop()


Allocated = tuple[Node, Runtime, DeviceInfo, ClaimTenant]


@pytest.fixture
def allocated(standin: MakeNode, tmp_path: Path) -> Callable[[], Allocated]:  # noqa: F811
    def make() -> Allocated:
        node = standin([GPU("GPU-a", total=64 * MiB)])
        rt = runtime(tmp_path)
        (device,) = rt.devices
        assert rt.barrier.run(device, "startup-unknown").result == "released"
        claim = ClaimTenant("team-a/c1", "team-a", "u1", pods=(POD,))
        rt.barrier.mark_allocated(device, claim)
        return node, rt, device, claim
    return make


def test_a_foreign_holder_of_the_gpu_node_blocks_the_release_and_is_reported(
        allocated: Callable[[], Allocated], holders: list[Holder]) -> None:
    node, rt, device, claim = allocated()
    rt.barrier.deps.pod_name = lambda uid: "team-b/debug-0" if uid == OTHER else None
    gpu0 = dev(node, "nvidia0")
    other = Holder(node, dev(node, "nvidiactl"), gpu0, pod=OTHER)
    holders.append(other)
    record = rt.barrier.run(device, "deallocated", claim)
    assert record.result == "quarantined" and (record.reason or "").startswith("foreign contexts")
    assert other.alive() and record.pids_sigterm == [] and record.pids_sigkill == []
    (entry,) = record.foreign_processes
    assert entry["pid"] == other.pid and entry["owner"] == f"pod team-b/debug-0 (uid {OTHER})"
    assert entry["nvml_listed"] is False and entry["device_nodes"] == [gpu0]
    assert f"pid {other.pid} (pod team-b/debug-0 (uid {OTHER})) holding {gpu0}" in (record.reason or "")
    assert record.device_handle_scan is not None and record.device_handle_scan["nodes"] == ["/dev/nvidia0"]
    assert rt.barrier.recover(device) is None  # NVML lists nobody, but the node is held: stays guarded
    other.stop()
    released = rt.barrier.recover(device)
    assert released is not None and released.trigger == "zero-contexts" and released.result == "released"
    assert rt.barrier.deps.store.load(device.name).phase is Phase.CLEAN


def test_the_claims_pod_holding_the_gpu_node_is_signalled(
        allocated: Callable[[], Allocated], holders: list[Holder]) -> None:
    node, rt, device, claim = allocated()
    mine = Holder(node, dev(node, "nvidiactl"), dev(node, "nvidia0"), pod=POD)
    holders.append(mine)
    record = rt.barrier.run(device, "deallocated", claim)
    assert record.result == "released", record.reason
    assert record.pids_sigterm == [mine.pid] and record.foreign_processes == []
    mine.proc.wait(timeout=10)
    assert not mine.alive()


def test_nvidiactl_and_uvm_alone_do_not_block(allocated: Callable[[], Allocated], holders: list[Holder]) -> None:
    node, rt, device, claim = allocated()
    host = Holder(node, dev(node, "nvidiactl"), dev(node, "nvidia-uvm"), dev(node, "nvidia1"), pod=None)  # other GPU
    holders.append(host)
    record = rt.barrier.run(device, "deallocated", claim)
    assert record.result == "released", record.reason
    assert host.alive() and record.pids_sigterm == [] and record.foreign_processes == []


def test_a_mig_slice_counts_holders_of_its_capability_nodes_only(
        standin: MakeNode, tmp_path: Path, holders: list[Holder]) -> None:  # noqa: F811
    """gi1's ``access`` file maps it to nvidia-cap12: that blocks the slice; the parent's /dev/nvidia0 does not.

    The stand-in driver publishes the ``access`` files of its live GIs and CIs (standin.c ``si_caps_publish``).
    """
    gi = GI(1, [CI("MIG-q0")], placement_start=0, total=64 * MiB)
    node = standin([a100_mig("GPU-m", 0, [gi])])
    rt = runtime(tmp_path)
    caps = node.proc_root / "driver/nvidia/capabilities/gpu0/mig"
    assert (caps / "gi1/access").read_text().startswith("DeviceFileMinor: 12\n")
    assert (caps / "gi1/ci0/access").read_text().startswith("DeviceFileMinor: 13\n")
    device = rt.device("gpu-0-mig-1g10gb-19-0")
    assert device.gpu_instance_id == 1 and device.compute_instance_ids == (0,)  # from NVML's enumeration
    parent = Holder(node, dev(node, "nvidiactl"), dev(node, "nvidia0"), pod=None)  # a tenant of another slice
    holders.append(parent)
    record = rt.barrier.run(device, "startup-unknown")
    assert record.result == "released", record.reason
    scan = record.device_handle_scan
    assert scan is not None and "/dev/nvidia-caps/nvidia-cap12" in scan["nodes"] and scan["problem"] is None
    cap13 = dev(node, "nvidia-caps/nvidia-cap13")
    cap = Holder(node, dev(node, "nvidia0"), cap13, pod=None)
    holders.append(cap)
    record = rt.barrier.run(device, "startup-unknown")
    assert record.result == "quarantined" and (record.reason or "").startswith("foreign contexts")
    assert [p["pid"] for p in record.foreign_processes] == [cap.pid]
    assert record.foreign_processes[0]["device_nodes"] == [cap13]


def test_a_mig_slice_whose_capability_nodes_cannot_be_mapped_is_not_released(
        standin: MakeNode, tmp_path: Path) -> None:  # noqa: F811
    """Review finding 1: no ``access`` files (holders of the slice's nodes unseen): refused, guarded, retried."""
    from dra_constructs.agent.barrier import HANDLE_SCAN_FAILED

    gi = GI(1, [CI("MIG-q0")], placement_start=0, total=64 * MiB)
    node = standin([a100_mig("GPU-m", 0, [gi])], mig_caps=False, generation="13.3")  # compute mode guards MIG
    rt = runtime(tmp_path)
    device = rt.device("gpu-0-mig-1g10gb-19-0")
    record = rt.barrier.run(device, "startup-unknown")
    assert record.result == "quarantined" and (record.reason or "").startswith(HANDLE_SCAN_FAILED), record.reason
    assert "gi1/access" in (record.reason or "") and record.pids_sigterm == []
    assert b'dra_sanitizer_device_handle_scan_problems_total{outcome="failed"} 1.0' in rt.metrics.render()
    assert rt.barrier.recover(device) is None  # still unmapped: stays quarantined
    assert rt.barrier.deps.store.load(device.name).phase is Phase.QUARANTINED
    for name, minor in (("gi1/access", 12), ("gi1/ci0/access", 13)):  # published now (as mig-minors numbers them)
        access = node.proc_root / "driver/nvidia/capabilities/gpu0/mig" / name
        access.parent.mkdir(parents=True, exist_ok=True)
        access.write_text(f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\nDeviceFileModify: 1\n")
    released = rt.barrier.recover(device)  # mapped, nobody holds them: sanitized
    assert released is not None and released.result == "released", released and released.reason
