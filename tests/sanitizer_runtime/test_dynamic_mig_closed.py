"""DynamicMIG closed (issue 20 items 7, 8, 16; D4, D8) on the simulated node.

The driver's prepare racing the barrier (r05), the real instance behind every placement guard,
a crash between the transient create and its record (r10), the whole GPU ``gpu-N`` (r09), a
transient instance that vanishes mid-barrier (kubelet plugin restart) and the node-wide per-GPU
lock (D8, two processes).
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from dra_constructs.agent.backends.base import BackendError, ComputeMode
from dra_constructs.agent.backends.simulated import SimulatedCrash, SimulatedNode
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.kube import ApiError, Tenant
from dra_constructs.agent.runtime import Runtime, build_runtime
from dra_constructs.agent.simkube import SimulatedKube
from dra_constructs.agent.state import Phase

from .conftest import sim_config

A = Tenant("team-a/a", "team-a", "uid-A")
B = Tenant("team-b/b", "team-b", "uid-B")
P = "gpu-0-mig-1g10gb-19-3"
SETTINGS = SimulatedBackendSettings(gpus=1, dynamic_mig=True, memory_bytes=1024)


class _NoTaints(SimulatedKube):
    serve_taint_rules = False  # discovery does not list devicetaintrules (the gate is off)

    def apply_taint_rule(self, body):  # type: ignore[no-untyped-def]  # 1.32-like: DeviceTaintRules not served
        raise ApiError(404, "the server could not find the requested resource")


def _runtime(tmp_path: Path, node: SimulatedNode, kube: SimulatedKube | None = None, **hooks: object) -> Runtime:
    config = sim_config(tmp_path, "1.34", simulated=SETTINGS)
    rt = build_runtime(config, kube_ops=kube or SimulatedKube(), node=node, fsync=False, **hooks)  # type: ignore[arg-type]
    for device in rt.devices:
        assert rt.barrier.run(device, "startup-unknown").result == "released", device.name
    return rt


def _tenant_ran(rt: Runtime, node: SimulatedNode, name: str, tenant: Tenant = A) -> DeviceInfo:
    device = rt.barrier.deps.inventory[name]
    rt.barrier.mark_allocated(device, tenant)
    node.prepare(name)
    node.start_tenant(name, [], random.Random(1))
    node.unprepare(name)
    assert node.audit(name).nonzero_bytes > 0
    return device


# --- r05: the driver prepares the next claim while the barrier runs ---------------------------

def test_driver_instance_created_before_the_transient_is_guarded_not_left_default(tmp_path: Path) -> None:
    armed = {"on": False}
    node = SimulatedNode(SETTINGS)

    def driver_prepares_b(device: str, point: str) -> None:
        if armed["on"] and device == P and point == "verify-contexts":
            armed["on"] = False
            node.prepare(P)  # NodePrepareResources for claim B creates its instance at P

    rt = _runtime(tmp_path, node, _NoTaints(), crash_hook=driver_prepares_b)
    device = _tenant_ran(rt, node, P)
    residue = node.audit(P).nonzero_bytes
    armed["on"] = True
    record = rt.barrier.run(device, "deallocated", A)
    assert record.result == "quarantined" and "the DRA driver prepared the next claim" in (record.reason or "")
    assert record.compute_mode_guard is True and node.compute_mode(P) is ComputeMode.PROHIBITED
    assert node.audit(P).nonzero_bytes == residue  # nothing filled: B's instance, guarded, A's bytes untouched
    node.nvml.set_compute_mode(rt.barrier.deps.partitions.instance(device), ComputeMode.DEFAULT)  # type: ignore[union-attr,arg-type]
    assert rt.barrier.recover(device) is None  # the tick re-applies the guard on the real instance
    assert node.compute_mode(P) is ComputeMode.PROHIBITED


def test_tenant_leaving_and_api_down_guard_the_real_instance_of_a_placement(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS)
    rt = _runtime(tmp_path, node, _NoTaints())
    name = "gpu-0-mig-1g10gb-19-6"
    device = rt.barrier.deps.inventory[name]
    rt.barrier.mark_allocated(device, A)
    node.prepare(name)
    assert device.uuid.startswith("DYN-")  # the placeholder: NVML never resolves it
    rt.barrier.tenant_leaving(device)
    assert node.compute_mode(name) is ComputeMode.PROHIBITED
    node.nvml.set_compute_mode(rt.barrier.deps.partitions.instance(device), ComputeMode.DEFAULT)  # type: ignore[union-attr,arg-type]
    assert rt.barrier.prohibit(device, "API down")
    assert node.compute_mode(name) is ComputeMode.PROHIBITED


def test_awaiting_zero_contexts_on_a_placement_counts_the_real_instances_processes(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS)
    rt = _runtime(tmp_path, node)
    device = rt.barrier.deps.inventory[P]
    rt.barrier.mark_allocated(device, A)
    node.prepare(P)
    assert rt.barrier._no_contexts(device)  # the instance is empty (the placeholder UUID: an error, "wait")
    node.start_tenant(P, [("obey", 0.0)], random.Random(3))
    assert not rt.barrier._no_contexts(device)  # a live process on the real instance
    node.kubelet_stop(P)
    node.unprepare(P)
    assert rt.barrier._no_contexts(device)  # no instance at the placement: nobody can hold a context


# --- r10: a crash between the transient create and its record ---------------------------------

def test_crash_right_after_the_transient_create_destroys_it_at_recovery(tmp_path: Path) -> None:
    armed = {"on": False}

    def on_mode(device: str, mode: ComputeMode) -> None:
        if armed["on"] and device == P and mode is ComputeMode.PROHIBITED and node.instance_exists(P):
            armed["on"] = False
            raise SimulatedCrash("killed right after the create")

    node = SimulatedNode(SETTINGS, on_compute_mode=on_mode)
    kube = SimulatedKube()
    rt = _runtime(tmp_path, node, kube)
    device = _tenant_ran(rt, node, P)
    armed["on"] = True
    try:
        rt.barrier.run(device, "deallocated", A)
    except SimulatedCrash:
        node.agent_died()
    assert node.instance_exists(P)
    rt2 = build_runtime(rt.config, kube_ops=kube, node=node, fsync=False)
    record = rt2.barrier.recover(rt2.barrier.deps.inventory[P])
    assert record is not None and record.result == "released", record and record.reason
    assert not node.instance_exists(P) and rt2.barrier.deps.store.load(P).phase is Phase.CLEAN
    assert node.audit(P).clean
    node.prepare("gpu-0-mig-2g20gb-14-2")  # the driver can prepare the placement's overlaps again


def test_crash_after_the_intent_before_the_create_recovers_clean(tmp_path: Path) -> None:
    armed = {"on": False}

    def hook(device: str, point: str) -> None:
        if armed["on"] and device == P and point == "transient-intent":
            armed["on"] = False
            raise SimulatedCrash(point)

    node = SimulatedNode(SETTINGS)
    kube = SimulatedKube()
    rt = _runtime(tmp_path, node, kube, crash_hook=hook)
    device = _tenant_ran(rt, node, P)
    armed["on"] = True
    try:
        rt.barrier.run(device, "deallocated", A)
    except SimulatedCrash:
        node.agent_died()
    assert rt.barrier.deps.store.load(P).transient_pending  # saved before the create
    rt2 = build_runtime(rt.config, kube_ops=kube, node=node, fsync=False)
    record = rt2.barrier.recover(rt2.barrier.deps.inventory[P])
    assert record is not None and record.result == "released" and not node.instance_exists(P)
    assert not rt2.barrier.deps.store.load(P).transient_pending


# --- the transient vanishes mid-barrier (kubelet plugin restart) -------------------------------

def test_transient_destroyed_under_the_barrier_does_not_count_and_reruns(tmp_path: Path) -> None:
    armed = {"on": False}
    node = SimulatedNode(SETTINGS)

    def plugin_restarts(device: str, point: str) -> None:
        if armed["on"] and device == P and point == "transient-created":
            armed["on"] = False
            node.partitions.destroy(rt.barrier.deps.inventory[P])  # the plugin's DestroyUnknownMIGDevices

    rt = _runtime(tmp_path, node, crash_hook=plugin_restarts)
    device = _tenant_ran(rt, node, P)
    armed["on"] = True
    record = rt.barrier.run(device, "deallocated", A)
    assert record.result == "quarantined" and (record.reason or "").startswith("transient instance vanished")
    assert node.audit(P).nonzero_bytes > 0  # indeed not filled
    again = rt.barrier.recover(device)  # the agent's tick: the barrier runs again
    assert again is not None and again.result == "released" and again.trigger == "rerun"
    assert node.audit(P).clean and not node.instance_exists(P)


# --- r09: the whole GPU gpu-N (Hopper+) ---------------------------------------------------------

def test_whole_gpu_is_in_the_inventory_and_overlaps_every_placement(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS, whole_gpu=True)
    rt = _runtime(tmp_path, node)
    inventory = rt.barrier.deps.inventory
    assert "gpu-0" in inventory and inventory["gpu-0"].whole_gpu
    assert set(rt.guard.overlaps("gpu-0")) == {n for n in inventory if n != "gpu-0"}
    assert "gpu-0" in rt.guard.overlaps(P)


def test_whole_gpu_release_fills_the_whole_gpu_with_mig_mode_off(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS, whole_gpu=True)
    kube = SimulatedKube()
    rt = _runtime(tmp_path, node, kube)
    whole = _tenant_ran(rt, node, "gpu-0")
    rules = {r["metadata"]["annotations"]["sanitizer.dra-constructs.io/device"] for r in kube.rules.values()}
    assert P in rules  # gpu-0 held: every placement over its memory is tainted
    record = rt.barrier.run(whole, "deallocated", A)
    assert record.result == "released" and record.transient_instance is None
    assert node.audit("gpu-0").clean and kube.rules == {}


def test_placement_released_with_mig_mode_off_fills_the_whole_gpu(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS, whole_gpu=True)
    rt = _runtime(tmp_path, node)
    device = _tenant_ran(rt, node, P)  # the driver turned MIG mode off at the last unprepare
    assert not node.partitions.mig_enabled(device)
    record = rt.barrier.run(device, "deallocated", A)
    assert record.result == "released", record.reason
    assert any("whole GPU gpu-0 is filled" in w for w in record.warnings)
    assert node.audit(P).clean and node.audit("gpu-0").clean


def test_placement_with_mig_off_while_the_whole_gpu_is_held_is_quarantined_and_nobody_killed(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS, whole_gpu=True)
    rt = _runtime(tmp_path, node)
    device = _tenant_ran(rt, node, P)
    rt.barrier.mark_allocated(rt.barrier.deps.inventory["gpu-0"], B)  # the whole GPU given away (no taints)
    node.prepare("gpu-0")
    pids = node.start_tenant("gpu-0", [("obey", 0.0)], random.Random(4), exited_residue=False)
    record = rt.barrier.run(device, "deallocated", A)
    assert record.result == "quarantined" and "held by claim team-b/b" in (record.reason or "")
    assert not record.pids_sigterm and not record.pids_sigkill and node.audit("gpu-0").live_contexts == len(pids)


def test_whole_gpu_prepare_refused_while_a_placement_instance_exists(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS, whole_gpu=True)
    node.prepare(P)
    try:
        node.prepare("gpu-0")
    except BackendError as error:
        assert "IN_USE" in str(error)
    else:
        raise AssertionError("the whole GPU was prepared beside a MIG instance")


# --- D8: one barrier per GPU, node-wide ----------------------------------------------------------

_HOLDER = """
import sys, time
from pathlib import Path
from dra_constructs.agent.config import AgentConfig, KubeSettings, SimulatedBackendSettings
from dra_constructs.agent.runtime import build_runtime
config = AgentConfig(node_name="node-a", backend="simulated", state_dir=sys.argv[1], evidence_file=sys.argv[1] + "/ev",
                     kube=KubeSettings(mode="disabled", kubernetes_version="1.34"),
                     simulated=SimulatedBackendSettings(gpus=1, dynamic_mig=True, memory_bytes=1024))
barrier = build_runtime(config, fsync=False).barrier  # a hand-run `dra-sanitizer once` on the same node
with barrier._parent_lock(barrier.deps.inventory[sys.argv[2]]):
    Path(sys.argv[3]).write_text("held")
    while not Path(sys.argv[4]).exists():
        time.sleep(0.01)
"""


def test_per_gpu_lock_excludes_a_second_process(tmp_path: Path) -> None:
    node = SimulatedNode(SETTINGS)
    rt = _runtime(tmp_path, node)
    device = _tenant_ran(rt, node, P)
    held, done = tmp_path / "held", tmp_path / "done"
    state_dir = rt.barrier.deps.store.root
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(state_dir), P, str(held), str(done)])
    try:
        deadline = time.monotonic() + 30
        while not held.exists():
            assert time.monotonic() < deadline and child.poll() is None
            time.sleep(0.01)
        lock = rt.barrier._parent_lock(device)
        assert lock is not None and not lock.acquire(blocking=False)  # a hand-run `once` holds the GPU
        out: list[object] = []
        thread = threading.Thread(target=lambda: out.append(rt.barrier.run(device, "deallocated", A)), daemon=True)
        thread.start()
        thread.join(0.5)
        assert thread.is_alive() and not out  # waits for the other process's barrier
        done.write_text("")
        thread.join(30)
        assert out and out[0].result == "released"  # type: ignore[attr-defined]
    finally:
        done.write_text("")
        child.wait(30)


# --- r13's runtime side: no MIG management -> guarded, then sanitized once it works ---------------

def test_deferred_placement_is_sanitized_after_a_restart_that_can_manage_mig(tmp_path: Path) -> None:
    from dra_constructs.agent.migaccess import MigAccess

    node = SimulatedNode(SETTINGS)
    kube = SimulatedKube()
    rt = _runtime(tmp_path, node, kube)
    device = _tenant_ran(rt, node, P)
    reports: list[str] = []
    rt.barrier.deps.mig_access = MigAccess("test: no MIG config capability", reports.append)
    record = rt.barrier.run(device, "deallocated", A)
    assert record.result == "deferred" and reports == ["test: no MIG config capability"]
    assert not node.instance_exists(P) and node.audit(P).nonzero_bytes > 0  # nothing created, nothing filled
    ruled = {r["metadata"]["annotations"]["sanitizer.dra-constructs.io/device"]: r["spec"]["taint"]["value"]
             for r in kube.rules.values()}
    assert ruled[P] == "quarantined"  # guarded meanwhile
    assert rt.barrier.recover(device) is None  # the tick: still cannot, stays guarded (no new record)
    rt2 = build_runtime(rt.config, kube_ops=kube, node=node, fsync=False)  # restarted with the capability
    again = rt2.barrier.recover(rt2.barrier.deps.inventory[P])
    assert again is not None and again.result == "released" and again.trigger == "mig-management-available"
    assert node.audit(P).clean and kube.rules == {}


def test_readiness_fails_while_the_agent_cannot_manage_mig(tmp_path: Path) -> None:
    from dra_constructs.agent.agent import Agent
    from dra_constructs.agent.clock import VirtualClock
    from dra_constructs.agent.migaccess import MigAccess

    rt = _runtime(tmp_path, SimulatedNode(SETTINGS))
    agent = Agent(rt, clock=VirtualClock())
    agent._started.set()
    assert agent.ready()
    rt.barrier.deps.mig_access = MigAccess("test: no MIG config capability")
    assert not agent.ready()


def test_release_of_a_whole_gpu_fill_finished_after_a_crash_restores_default(tmp_path: Path) -> None:
    armed = {"on": False}

    def hook(device: str, point: str) -> None:
        if armed["on"] and device == P and point == "releasing":
            armed["on"] = False
            raise SimulatedCrash(point)

    node = SimulatedNode(SETTINGS, whole_gpu=True)
    kube = SimulatedKube()
    rt = _runtime(tmp_path, node, kube, crash_hook=hook)
    device = _tenant_ran(rt, node, P)  # MIG mode off now: the barrier fills the whole GPU
    armed["on"] = True
    try:
        rt.barrier.run(device, "deallocated", A)
    except SimulatedCrash:
        node.agent_died()
    assert node.compute_mode("gpu-0") is ComputeMode.PROHIBITED  # guarded between the verify and the release
    rt2 = build_runtime(rt.config, kube_ops=kube, node=node, fsync=False)
    record = rt2.barrier.recover(rt2.barrier.deps.inventory[P])
    assert record is not None and record.result == "released"
    assert node.compute_mode("gpu-0") is ComputeMode.DEFAULT  # the next whole-GPU tenant can create contexts
