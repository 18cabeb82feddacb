"""DynamicMIG (item 11), cold partition reset (item 12) and claim preemption policies (item 13)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from dra_constructs.agent.backends.base import ComputeMode
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.kube import Tenant, allocated_devices
from dra_constructs.agent.policy import (
    SANITIZER_DRIVER,
    ContextsRemaining,
    PreemptionPolicy,
    policy_for,
)
from dra_constructs.agent.state import Phase

from .conftest import SimEnv
from .fakeapi import claim

TENANT = Tenant("team-a/claim-1", "team-a", "uid-1", boundary="team-a")
ONE_G = "gpu-0-mig-1g10gb-19-{}"
RULE = "dra-sanitizer-node-a-{}"


def _dynamic(tmp_path: Path) -> SimEnv:
    env = SimEnv(tmp_path, simulated=SimulatedBackendSettings(gpus=1, dynamic_mig=True, memory_bytes=1024))
    for device in env.rt.devices:  # agent start: every placement proven clean
        assert env.rt.barrier.run(device, "startup-unknown").result == "released"
    assert env.kube.rules == {}
    return env


def _dev(env: SimEnv, name: str):  # type: ignore[no-untyped-def]
    return env.rt.barrier.deps.inventory[name]


def _tainted(env: SimEnv) -> dict[str, str]:
    return {r["metadata"]["annotations"]["sanitizer.dra-constructs.io/device"]: r["spec"]["taint"]["value"]
            for r in env.kube.rules.values()}


# --- DynamicMIG ------------------------------------------------------------------------------

def test_dynamic_mig_allocation_guards_every_overlapping_placement(tmp_path: Path) -> None:
    env = _dynamic(tmp_path)
    env.rt.barrier.mark_allocated(_dev(env, ONE_G.format(3)), TENANT)
    assert _tainted(env) == {ONE_G.format(3): "in-use", "gpu-0-mig-2g20gb-14-2": "overlap",
                             "gpu-0-mig-3g40gb-9-0": "overlap", "gpu-0-mig-7g80gb-0-0": "overlap"}


def test_dynamic_mig_freed_placement_is_sanitized_through_a_transient_instance(tmp_path: Path) -> None:
    env = _dynamic(tmp_path)
    device = _dev(env, ONE_G.format(3))
    env.rt.barrier.mark_allocated(device, TENANT)
    env.node.prepare(device.name)  # the DRA driver creates the instance at prepare ...
    env.node.start_tenant(device.name, [], random.Random(1))  # ... the tenant writes and exits ...
    env.node.unprepare(device.name)  # ... and the driver destroys it at unprepare
    # The slice is gone, its memory is not: a claim on an overlapping placement would read it.
    assert env.node.audit("gpu-0-mig-2g20gb-14-2").nonzero_bytes > 0
    record = env.rt.barrier.run(device, "deallocated", TENANT)
    assert record.result == "released", record.reason
    assert record.transient_instance and record.transient_instance.startswith("MIG-sim-0000-3-1")
    assert record.guarded_overlaps == ["gpu-0-mig-2g20gb-14-2", "gpu-0-mig-3g40gb-9-0", "gpu-0-mig-7g80gb-0-0"]
    for name in (device.name, "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-3g40gb-9-0", "gpu-0-mig-7g80gb-0-0"):
        assert env.node.audit(name).clean, name
    assert env.kube.rules == {}  # every overlap guard removed after the verify
    assert env.rt.barrier.deps.partitions is not None
    assert env.rt.barrier.deps.partitions.instance(device) is None  # the transient instance is destroyed
    assert env.rt.barrier.deps.store.load(device.name).phase is Phase.CLEAN


def test_dynamic_mig_keeps_guards_that_a_live_neighbour_still_needs(tmp_path: Path) -> None:
    env = _dynamic(tmp_path)
    a, b = _dev(env, ONE_G.format(3)), _dev(env, ONE_G.format(5))
    other = Tenant("team-b/claim-2", "team-b", "uid-2")
    for device, tenant in ((a, TENANT), (b, other)):
        env.rt.barrier.mark_allocated(device, tenant)
        env.node.prepare(device.name)
        env.node.start_tenant(device.name, [], random.Random(2))
    env.node.unprepare(a.name)
    assert env.rt.barrier.run(a, "deallocated", TENANT).result == "released"
    assert _tainted(env) == {b.name: "in-use", "gpu-0-mig-2g20gb-14-4": "overlap",
                             "gpu-0-mig-3g40gb-9-4": "overlap", "gpu-0-mig-7g80gb-0-0": "overlap"}


def test_dynamic_mig_allocation_racing_a_release_keeps_the_shared_overlap_guard(tmp_path: Path) -> None:
    """A neighbour allocated while a release removes guards: the placement over both keeps its taint.

    1g@3 is released while 1g@2 is being allocated; 2g@2 overlaps both. The release decides that
    2g@2 overlaps nothing held, the allocation taints it, then the release deletes that taint:
    2g@2 is free to schedule over 1g@2's slices during 1g@2's next deallocation window.
    """
    env = _dynamic(tmp_path)
    a, c = _dev(env, ONE_G.format(3)), _dev(env, ONE_G.format(2))
    other = Tenant("team-b/claim-2", "team-b", "uid-2")
    env.rt.barrier.mark_allocated(a, TENANT)
    guard = env.rt.guard
    original_held, original_untaint = guard.held, guard.untaint
    racing: list[threading.Thread] = []
    releasing = threading.Event()

    def held(name: str) -> bool:
        answer = original_held(name)
        if releasing.is_set() and name == c.name and not racing:
            racing.append(threading.Thread(target=env.rt.barrier.mark_allocated, args=(c, other)))
            racing[0].start()
            racing[0].join(timeout=0.5)  # the allocation runs (or waits for the release) right here
        return answer

    def untaint(device: str, clock: object) -> bool:
        releasing.set()
        try:
            return original_untaint(device, clock)  # type: ignore[arg-type]
        finally:
            releasing.clear()

    guard.held, guard.untaint = held, untaint  # type: ignore[method-assign]
    assert env.rt.barrier.run(a, "deallocated", TENANT).result == "released"
    assert racing
    racing[0].join(timeout=10)
    assert _tainted(env).get("gpu-0-mig-2g20gb-14-2") == "overlap"
    assert _tainted(env)[c.name] == "in-use"


def test_dynamic_mig_instance_still_prepared_is_sanitized_in_place(tmp_path: Path) -> None:
    env = _dynamic(tmp_path)
    device = _dev(env, ONE_G.format(0))
    env.rt.barrier.mark_allocated(device, TENANT)
    env.node.prepare(device.name)
    env.node.start_tenant(device.name, [("obey", 2.0)], random.Random(3))
    record = env.rt.barrier.run(device, "deallocated", TENANT)  # before the driver's unprepare
    assert record.result == "released" and record.transient_instance is None and record.pids_sigterm
    assert env.node.compute_mode(device.name) is ComputeMode.DEFAULT and env.node.audit(device.name).clean
    env.node.unprepare(device.name)  # the driver's unprepare still works (our worker is gone)


def test_dynamic_mig_transient_instance_blocked_by_an_overlap_quarantines(tmp_path: Path) -> None:
    env = _dynamic(tmp_path)
    device = _dev(env, ONE_G.format(1))
    env.rt.barrier.mark_allocated(device, TENANT)
    env.node.prepare("gpu-0-mig-7g80gb-0-0")  # cannot happen under the guard; the barrier must not pass
    record = env.rt.barrier.run(device, "deallocated", TENANT)
    assert record.result == "quarantined" and "INSUFFICIENT_RESOURCES" in (record.reason or "")


# --- cold partition reset --------------------------------------------------------------------

def _used(env: SimEnv, behaviours: list[tuple[str, float]] | None = None) -> None:
    env.rt.barrier.run(env.device, "startup-unknown")
    env.rt.barrier.mark_allocated(env.device, TENANT)
    env.node.start_tenant(env.device.name, behaviours or [("obey", 1.0)], random.Random(0))


def test_mig_instance_reset_recreates_the_partition_and_rekeys_the_state(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, partition_reset="mig-instance")
    old = env.device
    _used(env)
    record = env.rt.barrier.run(old, "deallocated", TENANT)
    assert record.result == "released", record.reason
    new = env.rt.barrier.deps.inventory[old.name]
    assert record.reset_type == "mig-instance" and record.reset_old_uuid == old.uuid
    assert record.reset_new_uuid == new.uuid != old.uuid and record.uuid == new.uuid
    assert record.reset_seconds is not None and record.reset_seconds > 0 and "resetting" in record.phase_seconds
    assert record.bytes_verified > 0 and record.coverage_of_free >= 0.99 and record.boundary == "team-a"
    state = env.rt.barrier.deps.store.load(old.name, new.uuid)
    assert state.phase is Phase.CLEAN and state.uuid == new.uuid
    assert env.node.audit(old.name).clean and env.kube.tainted(old.name) is None
    assert any(e["reason"] == "PartitionReset" and new.uuid in e["message"] for e in env.kube.events)
    assert env.rt.device(new.uuid).name == old.name  # `once --device <new uuid>` finds it


@pytest.mark.parametrize(("fault", "code"), [("nvml.partition_in_use", "IN_USE"),
                                             ("nvml.insufficient_resources", "INSUFFICIENT_RESOURCES")])
def test_reset_refused_by_the_driver_quarantines(tmp_path: Path, fault: str, code: str) -> None:
    env = SimEnv(tmp_path, partition_reset="mig-instance")
    _used(env)
    env.faults.rates[fault] = 1.0
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "quarantined" and code in (record.reason or "")
    assert env.kube.tainted(env.device.name)["spec"]["taint"]["value"] == "quarantined"
    env.faults.rates[fault] = 0.0
    released = env.rt.barrier.operator_release(env.rt.barrier.deps.inventory[env.device.name], "fixed", "bob")
    assert released.result == "released" and env.node.audit(env.device.name).clean


def test_reset_past_its_timeout_quarantines(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, partition_reset="mig-instance", reset_timeout_s=0.1)
    _used(env)
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "quarantined" and "reset_timeout_s" in (record.reason or "")


def test_gpu_reset_of_a_whole_gpu(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, partition_reset="gpu",
                 simulated=SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=0, memory_bytes=1024))
    _used(env)
    record = env.rt.barrier.run(env.device, "deallocated", TENANT)
    assert record.result == "released" and record.reset_type == "gpu"
    assert record.reset_old_uuid == record.reset_new_uuid == env.device.uuid  # a GPU keeps its UUID


def test_no_reset_without_a_tenant_or_when_off(tmp_path: Path) -> None:
    env = SimEnv(tmp_path, partition_reset="mig-instance")
    assert env.rt.barrier.run(env.device, "startup-unknown").reset_type is None
    off = SimEnv(tmp_path / "off")
    _used(off)
    assert off.rt.barrier.run(off.device, "deallocated", TENANT).reset_type is None


# --- claim preemption policy -----------------------------------------------------------------

def _policy_claim(parameters: dict[str, object], requests: list[str] | None = None,
                  source: str = "FromClaim") -> dict[str, object]:
    body = claim("c1", "team-a", "u1", ["gpu-0"])
    body["status"]["allocation"]["devices"]["config"] = [  # type: ignore[index]
        {"source": "FromClass", "opaque": {"driver": "gpu.nvidia.com", "parameters": {"kind": "GpuConfig"}}},
        {"source": source, "requests": requests or [], "opaque": {"driver": SANITIZER_DRIVER,
                                                                  "parameters": parameters}},
    ]
    return body


def test_the_agent_reads_the_policy_from_the_allocated_claim() -> None:
    params = {"apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy",
              "gracePeriodSeconds": 5, "onContextsRemaining": "Quarantine", "coldResetOnRelease": True}
    tenant = allocated_devices([_policy_claim(params)], "node-a")["gpu-0"]
    # No class policy: a claim's Quarantine cannot replace the agent's Kill (only a DeviceClass can, test_policy_bounds)
    assert tenant.policy == PreemptionPolicy(grace_period_seconds=5, on_contexts_remaining=ContextsRemaining.KILL,
                                             cold_reset_on_release=True)
    assert tenant.policy_problem is None and tenant.boundary == "team-a"
    assert allocated_devices([_policy_claim(params, requests=["other"])], "node-a")["gpu-0"].policy is None
    bad, problem = policy_for(_policy_claim({"kind": "PreemptionPolicy", "gracePeriodSeconds": "soon"}), "gpu")
    assert bad is None and problem and "gracePeriodSeconds" in problem  # ignored, named; no "strictest" reading
    assert PreemptionPolicy.model_validate(params).parameters() == params


def test_policy_grace_period_replaces_the_agents(tmp_path: Path) -> None:
    env = SimEnv(tmp_path)
    env.rt.barrier.run(env.device, "startup-unknown")
    tenant = Tenant("team-a/c", "team-a", "u", PreemptionPolicy(grace_period_seconds=5))
    env.rt.barrier.mark_allocated(env.device, tenant)
    pids = env.node.start_tenant(env.device.name, [("obey", 20.0)], random.Random(0))
    record = env.rt.barrier.run(env.device, "deallocated")
    assert record.result == "released" and record.pids_sigkill == pids  # 20 s > 5 s: killed at 5 s
    assert 5.0 <= record.phase_seconds["drain"] < 7.0  # virtual time: SIGKILL at the claim's 5 s
    assert record.policy is not None and record.policy["gracePeriodSeconds"] == 5.0


def test_policy_quarantine_until_zero_contexts_never_kills(tmp_path: Path) -> None:
    env = SimEnv(tmp_path)
    env.rt.barrier.run(env.device, "startup-unknown")
    policy = PreemptionPolicy(on_contexts_remaining=ContextsRemaining.QUARANTINE)
    env.rt.barrier.mark_allocated(env.device, Tenant("team-a/c", "team-a", "u", policy))
    env.node.start_tenant(env.device.name, [("obey", 500.0)], random.Random(0))
    record = env.rt.barrier.run(env.device, "deallocated")
    assert record.result == "quarantined" and record.pids_sigkill == [] and record.pids_sigterm
    assert (record.reason or "").startswith("awaiting zero contexts")
    assert env.rt.barrier.recover(env.device) is None  # contexts remain: still quarantined, still guarded
    env.node.clock(env.device.name).sleep(600)  # the process finishes on its own (SIGTERM after 500 s)
    released = env.rt.barrier.recover(env.device)
    assert released is not None and released.result == "released" and released.trigger == "zero-contexts"
    assert env.node.audit(env.device.name).clean


def test_policy_cold_reset_on_release_with_the_node_setting_off(tmp_path: Path) -> None:
    env = SimEnv(tmp_path)
    env.rt.barrier.run(env.device, "startup-unknown")
    env.rt.barrier.mark_allocated(env.device, Tenant("t/c", "t", "u", PreemptionPolicy(cold_reset_on_release=True)))
    env.node.start_tenant(env.device.name, [], random.Random(0))
    record = env.rt.barrier.run(env.device, "deallocated")
    assert record.result == "released" and record.reset_type == "mig-instance"


def test_a_claim_cannot_switch_off_the_cold_reset_its_device_class_requires() -> None:
    """The DeviceClass (the admin's) asks for a cold reset; the tenant's own claim config must not undo it."""
    body = _policy_claim({"apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy",
                          "gracePeriodSeconds": 5, "coldResetOnRelease": False})
    body["status"]["allocation"]["devices"]["config"].insert(0, {  # type: ignore[index]
        "source": "FromClass", "opaque": {"driver": SANITIZER_DRIVER, "parameters": {
            "apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy",
            "coldResetOnRelease": True}}})
    policy, problem = policy_for(body, "gpu")
    assert problem is None and policy is not None
    assert policy.cold_reset_on_release is True and policy.grace_period_seconds == 5  # the rest: the claim's
    broken = _policy_claim({"apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy"},
                           source="FromClaim")
    broken["status"]["allocation"]["devices"]["config"].insert(0, {  # type: ignore[index]
        "source": "FromClass", "opaque": {"driver": SANITIZER_DRIVER, "parameters": {"kind": "Nope"}}})
    policy, problem = policy_for(broken, "gpu")  # an unreadable class policy is ignored and reported
    assert problem is not None and "class config" in problem and policy is not None
    assert policy.cold_reset_on_release is False
