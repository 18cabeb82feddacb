"""The drain's pid pinning: one handle scan per poll; a pid signalled only after a listing that follows its pidfd."""

from __future__ import annotations

import random
import signal
from collections.abc import Callable
from pathlib import Path

from dra_constructs.agent.backends.simulated import kubelet_cgroup
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.devhandles import DeviceHandles, HandleHolder, HandleScan
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.kube import Tenant

from .conftest import SimEnv

POD = "0c4e5f1a-7d2b-4c9e-9a41-5b7e2f3d8c10"
OTHER_POD = "7a1d2c3b-0000-4e5f-8a9b-0c1d2e3f4a5b"
TENANT = Tenant("team-a/claim-1", "team-a", "uid-1", pods=(POD,))
WHOLE_GPU = SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=2048)


class PidfdSignaller:
    """``OsSignaller``'s pidfd contract (backends/base.py) over the simulated signaller, with a log.

    ``pin`` opens a pidfd and answers True only when it newly did; False for a pid already pinned
    or one that is gone (``pidfd_open`` fails). A SIGKILL closes the pid's pidfd (``_forget``: the
    next ``pin`` opens a new one), and pidfds of processes that ended are pruned at each ``pin``.
    """

    def __init__(self, inner: object, alive: Callable[[int], bool], log: list[tuple[str, int]]) -> None:
        self._inner = inner
        self._alive = alive
        self._log = log
        self._fds: set[int] = set()

    def pin(self, pid: int) -> bool:
        self._fds = {p for p in self._fds if self._alive(p)}
        if pid in self._fds or not self._alive(pid):
            return False
        self._fds.add(pid)
        self._log.append(("pin", pid))
        return True

    def signal(self, pid: int, signum: int) -> bool:
        self._log.append((signal.Signals(signum).name, pid))
        sent = bool(self._inner.signal(pid, signum))  # type: ignore[attr-defined]
        if signum == signal.SIGKILL:
            self._fds.discard(pid)
        return sent


def _env(tmp_path: Path) -> SimEnv:
    env = SimEnv(tmp_path / "sim", simulated=WHOLE_GPU)
    env.rt.barrier.run(env.device, "startup-unknown")  # a known-clean device first
    env.rt.barrier.mark_allocated(env.device, TENANT)
    return env


def _scanning(env: SimEnv, log: list[tuple[str, int]], holders: Callable[[int], list[int]]) -> list[int]:
    """Wire a device-handle scan whose holders ``holders(n)`` names for the n-th scan; returns the scan counter."""
    count = [0]

    def scan(device: DeviceInfo) -> HandleScan:
        count[0] += 1
        log.append(("scan", count[0]))
        return HandleScan(("/dev/nvidia0",), holders=[HandleHolder(p, "python3", ("/dev/nvidia0",))
                                                      for p in holders(count[0])])

    env.rt.barrier.deps.device_handles = scan
    return count


def test_a_drain_poll_runs_one_device_handle_scan(tmp_path: Path) -> None:
    """An unkillable claim process, drained until the timeout with a real (empty) proc root scan.

    Before: after the SIGKILL (which closes its pidfd) every poll pinned it anew and re-ran the
    whole scan to confirm it: 182 scans for 121 polls. Now the pin comes before the poll's own
    listing, which confirms it: one scan per poll.
    """
    env = _env(tmp_path)
    (pid,) = env.node.start_tenant(env.device.name, [("unkillable", 0.0)], random.Random(0), pod=POD)
    root = tmp_path / "proc"
    root.mkdir()
    real = DeviceHandles(root, self_pid=1).scan
    scans = [0]

    def counted(device: DeviceInfo) -> HandleScan:
        scans[0] += 1
        return real(device)

    deps = env.rt.barrier.deps
    deps.device_handles = counted
    log: list[tuple[str, int]] = []
    deps.signaller = PidfdSignaller(deps.signaller, lambda p: p in deps.nvml.processes(env.device), log)
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "quarantined" and (record.reason or "").startswith("drain timeout after 60s")
    polls = round(env.config.drain_timeout_s / env.config.poll_interval_s) + 1
    assert scans[0] == polls == 121
    assert record.pids_sigterm == [pid] and record.pids_sigkill == [pid]
    kills = [e for e in log if e == ("SIGKILL", pid)]
    assert len(kills) == 61  # every poll from the grace period on, each through a pidfd opened before its listing
    assert ("SIGTERM", pid) in log and log.index(("pin", pid)) < log.index(("SIGTERM", pid))


def test_a_holder_only_the_scan_finds_is_signalled_after_a_scan_that_follows_its_pin(tmp_path: Path) -> None:
    """The claim's process holds /dev/nvidia0 without a context: NVML never lists it.

    It is pinned when the scan first finds it and signalled only after the next poll's scan
    names it again (a listing made after its pidfd exists); then it exits and the device is released.
    """
    env = _env(tmp_path)
    holder = 7001
    env.node.cgroups[holder] = kubelet_cgroup(POD, "cd" * 32)
    alive = {holder}
    log: list[tuple[str, int]] = []
    deps = env.rt.barrier.deps

    class Exits:
        def signal(self, pid: int, signum: int) -> bool:
            alive.discard(pid)  # it obeys SIGTERM at once
            return True

    deps.signaller = PidfdSignaller(Exits(), lambda p: p in alive, log)
    scans = _scanning(env, log, lambda n: sorted(alive))
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "released", record.reason
    assert record.pids_sigterm == [holder]
    pinned, termed = log.index(("pin", holder)), log.index(("SIGTERM", holder))
    assert any(kind == "scan" for kind, _ in log[pinned:termed])  # a listing between the pidfd and the signal
    assert scans[0] == 3  # found (pinned), confirmed and signalled, gone: one scan per poll


def test_a_pid_the_scan_listed_once_then_not_again_is_never_signalled(tmp_path: Path) -> None:
    """The scan named pid 7002 (the claim's pod); it was gone (its PID free for reuse) by the next listing.

    It is pinned, never signalled, and the device is released once a listing after the pin shows nobody.
    """
    env = _env(tmp_path)
    env.node.cgroups[7002] = kubelet_cgroup(POD, "ef" * 32)
    log: list[tuple[str, int]] = []
    deps = env.rt.barrier.deps
    deps.signaller = PidfdSignaller(deps.signaller, lambda p: True, log)  # the pidfd opens: on the PID's next owner
    _scanning(env, log, lambda n: [7002] if n == 1 else [])
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "released", record.reason
    assert ("pin", 7002) in log and not any(kind.startswith("SIG") for kind, _ in log)
    assert record.pids_sigterm == [] and record.pids_sigkill == []


def test_a_holder_appearing_after_the_claims_processes_left_blocks_the_release(tmp_path: Path) -> None:
    """The release is decided on the scan of the poll that finds the claim's processes gone, not an earlier one.

    The claim's process exits on SIGTERM at poll 1; a process of another pod opens /dev/nvidia0
    before poll 2's scan: it is reported, never signalled, and the device stays guarded.
    """
    env = _env(tmp_path)
    (pid,) = env.node.start_tenant(env.device.name, [("obey", 0.0)], random.Random(0), pod=POD)
    env.node.cgroups[7003] = kubelet_cgroup(OTHER_POD, "ab" * 32)
    log: list[tuple[str, int]] = []
    deps = env.rt.barrier.deps
    deps.signaller = PidfdSignaller(deps.signaller, lambda p: True, log)
    _scanning(env, log, lambda n: [] if n == 1 else [7003])
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.pids_sigterm == [pid]
    assert record.result == "quarantined" and "foreign contexts" in (record.reason or "")
    assert [p["pid"] for p in record.foreign_processes] == [7003]
    assert not any(kind.startswith("SIG") and who == 7003 for kind, who in log)


def test_the_timeout_names_a_holder_the_last_scan_found_before_it_could_be_signalled(tmp_path: Path) -> None:
    """A claim's holder the scan first finds at the last poll is pinned, not signalled, and named in the reason."""
    env = _env(tmp_path)
    (pid,) = env.node.start_tenant(env.device.name, [("unkillable", 0.0)], random.Random(0), pod=POD)
    env.node.cgroups[7004] = kubelet_cgroup(POD, "12" * 32)
    log: list[tuple[str, int]] = []
    deps = env.rt.barrier.deps
    deps.signaller = PidfdSignaller(deps.signaller, lambda p: p == 7004 or p in deps.nvml.processes(env.device), log)
    _scanning(env, log, lambda n: [7004] if n == 121 else [])  # the 121st poll is the 60 s drain's last
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "quarantined", record.reason
    assert (record.reason or "").startswith(f"drain timeout after 60s: contexts still held by pids {pid}, 7004")
    assert ("pin", 7004) in log and not any(kind.startswith("SIG") and who == 7004 for kind, who in log)
