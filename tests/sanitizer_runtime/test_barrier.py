"""The barrier on the simulated node: each step, each failure, crash recovery, the 1.32 guard."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from dra_constructs.agent.backends.base import ComputeMode
from dra_constructs.agent.backends.simulated import FaultInjector, SimulatedCrash
from dra_constructs.agent.barrier import CRASH_POINTS
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.state import Phase

from .conftest import SimEnv

TENANT = Tenant("team-a/claim-1", "team-a", "uid-1")


def _tenant(env: SimEnv, behaviours: list[tuple[str, float]], seed: int = 0) -> list[int]:
    env.rt.barrier.run(env.device, "startup-unknown")  # a known-clean device first
    env.rt.barrier.mark_allocated(env.device, TENANT)
    return env.node.start_tenant(env.device.name, behaviours, random.Random(seed))


def test_clean_release_zeroes_memory_and_removes_the_guard(sim: SimEnv, tmp_path: Path) -> None:
    pids = _tenant(sim, [("obey", 5.0), ("obey", 40.0)])
    assert sim.node.audit(sim.device.name).nonzero_bytes > 0
    assert sim.kube.tainted(sim.device.name)["spec"]["taint"]["value"] == "in-use"
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "released", record.reason
    assert sim.node.audit(sim.device.name).clean
    assert sim.kube.tainted(sim.device.name) is None
    assert sim.node.compute_mode(sim.device.name) is ComputeMode.DEFAULT
    assert record.pids_sigterm == pids and record.pids_sigkill == [pids[1]]  # 40 s > 30 s grace
    assert record.contexts_after_drain == 0 and record.nonzero_words == 0
    assert record.bytes_verified == record.bytes_zeroed == record.bytes_free > 0 and record.coverage_of_free == 1.0
    assert record.coverage == 1792 / 2048  # of what the device holds: our context (256 B) was not read
    assert record.tenant_namespace == "team-a" and record.claim == "team-a/claim-1"
    assert set(record.phase_seconds) == {"guard", "drain", "verify-contexts", "fill", "verify", "releasing"}
    assert 30.0 <= record.phase_seconds["drain"] < 31.0  # virtual time: grace then SIGKILL
    lines = [json.loads(line) for line in (tmp_path / "evidence.jsonl").read_text().splitlines()]
    assert lines[-1]["result"] == "released" and lines[-1]["device"] == sim.device.name
    assert sim.rt.barrier.deps.store.load(sim.device.name).phase is Phase.CLEAN


def test_unkillable_process_quarantines_only_that_device(sim: SimEnv) -> None:
    _tenant(sim, [("unkillable", 0.0)])
    other = sim.rt.devices[1]
    sim.rt.barrier.run(other, "startup-unknown")
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "quarantined" and record.reason.startswith("drain timeout after 60s")
    rule = sim.kube.tainted(sim.device.name)
    assert rule["spec"]["taint"]["value"] == "quarantined"
    assert "drain timeout" in rule["metadata"]["annotations"]["sanitizer.dra-constructs.io/reason"]
    assert sim.node.compute_mode(sim.device.name) is ComputeMode.PROHIBITED
    assert sim.kube.events[-1]["reason"] == "DeviceQuarantined" and sim.kube.events[-1]["type"] == "Warning"
    assert sim.rt.barrier.deps.store.load(sim.device.name).phase is Phase.QUARANTINED
    # The neighbour slice is untouched and in service.
    assert sim.rt.barrier.deps.store.load(other.name).phase is Phase.CLEAN
    assert sim.kube.tainted(other.name) is None


@pytest.mark.parametrize(("op", "reason"), [
    ("cuda.memset_silent", "verify found"),
    ("cuda.shortfall", "coverage"),
    ("cuda.alloc", "cuMemAlloc"),
    ("cuda.verify", "cuLaunchKernel(verify)"),
    ("cuda.open", "cuCtxCreate"),
    ("nvml.gpu_lost", "GPU_IS_LOST"),
])
def test_each_hardware_failure_quarantines_with_its_reason(sim: SimEnv, op: str, reason: str) -> None:
    _tenant(sim, [("obey", 1.0)])
    sim.faults.rates[op] = 1.0
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "quarantined" and reason in (record.reason or "")
    assert sim.kube.tainted(sim.device.name)["spec"]["taint"]["value"] == "quarantined"


def test_transient_nvml_errors_do_not_quarantine(sim: SimEnv) -> None:
    _tenant(sim, [("obey", 1.0)])
    sim.faults.rates["nvml.processes"] = 0.3
    sim.faults._rng = random.Random(4)
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "released" and any("NVML_ERROR_UNKNOWN" in w for w in record.warnings)


def test_api_errors_are_retried(sim: SimEnv) -> None:
    _tenant(sim, [("obey", 1.0)])
    sim.faults.rates.update({"kube.apply": 0.5, "kube.delete": 0.5})
    sim.faults._rng = random.Random(1)
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "released" and sim.kube.tainted(sim.device.name) is None
    assert "kube.apply" in sim.faults.injected or "kube.delete" in sim.faults.injected


def test_scrub_on_free_required_but_off_quarantines(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, require_scrub_on_free=True)
    record = env.rt.barrier.run(env.device, "startup-unknown")
    assert record.result == "quarantined" and "scrub-on-free" in (record.reason or "")
    assert record.scrub_on_free_disabled is True


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_crash_at_every_point_is_recovered_without_a_dirty_release(tmp_path: Path, point: str) -> None:
    armed = {"on": False}

    def hook(device: str, where: str) -> None:
        if armed["on"] and where == point:
            armed["on"] = False
            raise SimulatedCrash(where)

    dynamic = point.startswith("transient")
    if point.startswith("reset"):
        env = SimEnv(tmp_path, crash_hook=hook, partition_reset="mig-instance")
    elif dynamic:
        env = SimEnv(tmp_path, crash_hook=hook,
                     simulated=SimulatedBackendSettings(gpus=1, dynamic_mig=True, memory_bytes=1024))
    else:
        env = SimEnv(tmp_path, crash_hook=hook)
    behaviours = [("unkillable", 0.0)] if point.startswith("quarantine") else [("obey", 50.0)]
    if dynamic:  # DynamicMIG: the driver created the instance at prepare and destroyed it at unprepare
        for placement in env.rt.devices:  # every placement proven clean (else its overlaps stay guarded)
            assert env.rt.barrier.run(placement, "startup-unknown").result == "released"
        env.rt.barrier.mark_allocated(env.device, TENANT)
        env.node.prepare(env.device.name)
        env.node.start_tenant(env.device.name, [], random.Random(0))
        env.node.unprepare(env.device.name)
    else:
        _tenant(env, behaviours)
    armed["on"] = True
    try:
        env.rt.barrier.run(env.device, "deallocated", TENANT)
    except SimulatedCrash:
        env.node.agent_died()
    else:
        pytest.fail(f"crash point {point} was never reached")
    state = env.rt.barrier.deps.store.load(env.device.name)
    assert state.phase is not Phase.CLEAN  # never clean without a finished cycle
    if state.phase is not Phase.RELEASING:
        assert env.kube.tainted(env.device.name) is not None  # still guarded while not proven clean
    env.restart()
    device = env.rt.barrier.deps.inventory[env.device.name]
    record = env.rt.barrier.recover(device)
    final = env.rt.barrier.deps.store.load(env.device.name).phase
    audit = env.node.audit(env.device.name)
    if point.startswith("quarantine"):
        assert final is Phase.QUARANTINED and env.kube.tainted(env.device.name) is not None
        assert env.node.compute_mode(env.device.name) is ComputeMode.PROHIBITED
    else:
        assert final is Phase.CLEAN and audit.clean and env.kube.tainted(env.device.name) is None
        # Every released record carries its proof, a release finished after a crash included (item 9).
        assert record is not None and record.result == "released"
        assert record.coverage_of_free >= 0.99 and record.bytes_verified > 0 and record.nonzero_words == 0
    if dynamic:
        assert env.rt.barrier.deps.partitions.instance(env.device) is None  # the transient one is gone


def test_operator_release_reruns_the_whole_barrier(sim: SimEnv, tmp_path: Path) -> None:
    _tenant(sim, [("unkillable", 0.0)])
    assert sim.rt.barrier.run(sim.device, "deallocated", TENANT).result == "quarantined"
    assert sim.rt.barrier.operator_release(sim.device, "still stuck", "alice").result == "quarantined"
    sim.node.repair(sim.device.name)
    record = sim.rt.barrier.operator_release(sim.device, "hung NFS mount fixed", "alice")
    assert record.result == "released" and sim.node.audit(sim.device.name).clean
    notes = [json.loads(x) for x in (tmp_path / "evidence.jsonl").read_text().splitlines()]
    releases = [n for n in notes if n["kind"] == "operator-release"]
    assert [n["operator"] for n in releases] == ["alice", "alice"]
    assert "hung NFS mount fixed" in releases[-1]["reason"]


def test_without_device_taints_the_guard_is_compute_mode(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, version="1.32")
    assert not env.rt.guard.has_taints and "1.32 has no DeviceTaintRule" in env.rt.guard.describe("gpu-0")
    env.rt.barrier.run(env.device, "startup-unknown")
    env.rt.barrier.mark_allocated(env.device, TENANT)
    env.node.start_tenant(env.device.name, [("obey", 2.0)], random.Random(0))
    env.rt.barrier.tenant_leaving(env.device)  # last pod terminating: no new contexts from now on
    assert env.node.compute_mode(env.device.name) is ComputeMode.PROHIBITED
    assert env.kube.rules == {}
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "released" and record.taint.startswith("missing: none: Kubernetes 1.32")
    assert env.node.compute_mode(env.device.name) is ComputeMode.DEFAULT and env.node.audit(env.device.name).clean


def test_whole_gpus_and_mig_slices_are_both_sanitized(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, simulated=SimulatedBackendSettings(gpus=2, mig_slices_per_gpu=0, memory_bytes=1024))
    assert [d.name for d in env.rt.devices] == ["gpu-0", "gpu-1"] and not env.device.is_mig
    assert env.rt.barrier.run(env.device, "once").result == "released"


def test_fault_injector_is_reproducible() -> None:
    a = FaultInjector.uniform(random.Random(7), 0.5)
    b = FaultInjector.uniform(random.Random(7), 0.5)
    assert [a.hit("cuda.open") for _ in range(50)] == [b.hit("cuda.open") for _ in range(50)]


def test_a_pid_reused_between_listing_and_signal_is_not_signalled(sim: SimEnv) -> None:
    """NVML listed pid 4242; it exited and the PID went to another process before the pidfd was opened.

    The barrier pins (pidfd) what it listed, lists again, and signals only pids still listed:
    the pidfd then refers to the process that holds the context, never to the PID's next owner.
    """
    sent: list[tuple[int, int]] = []
    pinned: list[int] = []

    class Pinning:
        def pin(self, pid: int) -> bool:
            pinned.append(pid)
            return True

        def signal(self, pid: int, signum: int) -> bool:
            sent.append((pid, signum))
            return True

    deps = sim.rt.barrier.deps
    real = deps.nvml.processes
    listings = iter([[4242], []])
    deps.signaller = Pinning()
    deps.nvml.processes = lambda device: next(listings, None) or real(device)  # type: ignore[method-assign]
    record = sim.rt.barrier.run(sim.device, "deallocated", TENANT)
    assert record.result == "released", record.reason
    assert pinned == [4242] and sent == [] and record.pids_sigterm == []
