"""MIG isolation (issue 23 item 6) on the simulated node: the agent's isolation taints, driven as the watches drive it.

Two GPUs with three 1g MIG slices each (static MIG) or DynamicMIG placements; claims as the API
serves them, with the toleration ``GpuTenant(mig_isolation=...)`` renders.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.backends.simulated import SimulatedNode
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import SimulatedBackendSettings
from dra_constructs.agent.isolation import exclusive_claim, isolation_rule_name
from dra_constructs.agent.state import Phase
from dra_constructs.isolation import (
    CONFLICT_VALUE,
    ISOLATION_TAINT_KEY,
    SHARED_VALUE,
    own_toleration,
    shared_toleration,
)

from .conftest import SimEnv
from .fakeapi import claim

MIG = SimulatedBackendSettings(gpus=2, mig_slices_per_gpu=3, memory_bytes=1024)
GPU0 = [f"gpu-0-mig-1g10gb-19-{s}" for s in (0, 1, 2)]
GPU1 = [f"gpu-1-mig-1g10gb-19-{s}" for s in (0, 1, 2)]
PA, PB = "aaaaaaaa-0000-4000-8000-00000000000a", "bbbbbbbb-0000-4000-8000-00000000000b"


def _claim(name: str, namespace: str, uid: str, devices: list[str], tolerations: list[dict[str, Any]],
           pod: str) -> dict[str, Any]:
    body = claim(name, namespace, uid, devices, reserved=[pod])
    body["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "mig.nvidia.com", "tolerations": tolerations}}]}}
    return body


def _exclusive(name: str, namespace: str, uid: str, devices: list[str], pod: str = PA) -> dict[str, Any]:
    return _claim(name, namespace, uid, devices, [own_toleration(namespace)], pod)


def _shared(name: str, namespace: str, uid: str, devices: list[str], pod: str = PB) -> dict[str, Any]:
    return _claim(name, namespace, uid, devices, [shared_toleration()], pod)


def _env(tmp_path: Path, settings: SimulatedBackendSettings = MIG, **fields: Any) -> SimEnv:
    fields.setdefault("mig_isolation", True)
    return SimEnv(tmp_path, "1.34", simulated=settings, **fields)


def _agent(env: SimEnv) -> Agent:
    agent = Agent(env.restart(), clock=VirtualClock())
    agent.api_known = True
    agent._allocated = agent._map([])
    agent.startup()
    agent.wait()
    return agent


def _set(agent: Agent, *claims: dict[str, Any]) -> None:
    agent._claims = {c["metadata"]["uid"]: c for c in claims}
    agent.reconcile()
    agent.wait()


def _value(env: SimEnv, device: str) -> str | None:
    rule = env.kube.rules.get(isolation_rule_name("node-a", device))
    if rule is None:
        return None
    taint = rule["spec"]["taint"]
    assert taint["key"] == ISOLATION_TAINT_KEY and taint["effect"] == "NoSchedule"
    assert rule["spec"]["deviceSelector"] == {"driver": "gpu.nvidia.com", "pool": "node-a", "device": device}
    return str(taint["value"])


def _values(env: SimEnv, devices: list[str]) -> list[str | None]:
    return [_value(env, d) for d in devices]


def test_an_exclusive_tenant_closes_its_gpu_and_a_shared_tenant_closes_its_own_to_exclusive_ones(
        tmp_path: Path) -> None:
    env = _env(tmp_path)
    agent = _agent(env)
    assert _values(env, GPU0 + GPU1) == [None] * 6  # nobody holds a GPU: no taint
    a = _exclusive("train-a", "team-a", "uid-A", [GPU0[0]])
    _set(agent, a)
    assert _values(env, GPU0) == ["team-a"] * 3  # the held slice too: it stays team-a's once cleaned
    assert _values(env, GPU1) == [None] * 3
    b = _shared("infer-b", "team-b", "uid-B", [GPU1[1]])
    _set(agent, a, b)
    assert _values(env, GPU1) == [SHARED_VALUE] * 3  # team-a (tolerates only team-a) cannot land beside team-b
    assert _values(env, GPU0) == ["team-a"] * 3
    # The barrier's own taint is a separate rule: in-use on the allocated slices.
    assert env.kube.rules[f"dra-sanitizer-node-a-{GPU0[0]}"]["spec"]["taint"]["value"] == "in-use"
    assert not any(e["reason"] == "IsolationBreached" for e in env.kube.events)


def test_the_taint_stays_through_the_barrier_and_goes_after_it(tmp_path: Path) -> None:
    seen: dict[str, str | None] = {}
    holder: dict[str, SimEnv] = {}

    def during(device: str, point: str) -> None:
        if point == "fill" and device == GPU0[0]:
            seen["fill"] = _value(holder["env"], GPU0[1])

    env = _env(tmp_path, crash_hook=during)
    holder["env"] = env
    agent = _agent(env)
    _set(agent, _exclusive("train-a", "team-a", "uid-A", [GPU0[0]]))
    env.node.start_tenant(GPU0[0], [("obey", 1.0)], random.Random(3), pod=PA)
    env.node.kubelet_stop(GPU0[0])
    _set(agent)  # the claim is released: the barrier runs, then the GPU is free again
    assert seen["fill"] == "team-a"  # while the released tenant's slice is sanitized, nobody else comes in
    assert env.rt.barrier.deps.store.load(GPU0[0]).phase is Phase.CLEAN
    assert _values(env, GPU0) == [None] * 3


def test_a_tenant_s_last_claim_lifts_it_not_the_first(tmp_path: Path) -> None:
    env = _env(tmp_path)
    agent = _agent(env)
    a1 = _exclusive("a1", "team-a", "uid-A1", [GPU0[0]])
    a2 = _exclusive("a2", "team-a", "uid-A2", [GPU0[2]], pod="cccccccc-0000-4000-8000-00000000000c")
    _set(agent, a1, a2)
    assert _values(env, GPU0) == ["team-a"] * 3
    _set(agent, a2)
    assert _values(env, GPU0) == ["team-a"] * 3  # team-a still holds GPU 0
    _set(agent)
    assert _values(env, GPU0) == [None] * 3


def test_a_race_is_reported_and_closes_the_gpu_nobody_is_killed(tmp_path: Path) -> None:
    env = _env(tmp_path)
    agent = _agent(env)
    a = _exclusive("train-a", "team-a", "uid-A", [GPU0[0]])
    b = _shared("infer-b", "team-b", "uid-B", [GPU0[1]])
    pids_a = env.node.start_tenant(GPU0[0], [("obey", 1.0)], random.Random(1), pod=PA)
    pids_b = env.node.start_tenant(GPU0[1], [("obey", 1.0)], random.Random(2), pod=PB)
    _set(agent, a, b)  # both allocated before the agent saw either: the taint came too late
    assert _values(env, GPU0) == [CONFLICT_VALUE] * 3  # tolerated by nobody: no third tenant joins
    (event,) = [e for e in env.kube.events if e["reason"] == "IsolationBreached"]
    assert event["type"] == "Warning" and "team-a" in event["message"] and "team-b" in event["message"]
    assert b"dra_sanitizer_isolation_breaches_total 1.0" in env.rt.metrics.render()
    assert b"dra_sanitizer_isolation_conflict_gpus 1.0" in env.rt.metrics.render()
    alive = {p for d in (GPU0[0], GPU0[1]) for p in env.node.nvml.processes(env.rt.barrier.deps.inventory[d])}
    assert set(pids_a) | set(pids_b) <= alive  # reported, never killed
    _set(agent, a, b)
    assert len([e for e in env.kube.events if e["reason"] == "IsolationBreached"]) == 1  # once per breach
    env.node.kubelet_stop(GPU0[1])
    _set(agent, a)  # team-b leaves: its barrier runs, then the GPU is team-a's again
    assert _values(env, GPU0) == ["team-a"] * 3
    assert b"dra_sanitizer_isolation_conflict_gpus 0.0" in env.rt.metrics.render()


def test_without_mig_isolation_shared_tenants_get_no_taint(tmp_path: Path) -> None:
    env = _env(tmp_path, mig_isolation=False)
    agent = _agent(env)
    _set(agent, _shared("infer-b", "team-b", "uid-B", [GPU1[0]]), _exclusive("a", "team-a", "uid-A", [GPU0[0]]))
    assert _values(env, GPU1) == [None] * 3
    assert _values(env, GPU0) == ["team-a"] * 3  # the exclusive tenant asked for it: still enforced


def test_a_restart_sweeps_rules_left_over_and_keeps_a_lingering_tenant(tmp_path: Path) -> None:
    env = _env(tmp_path)
    agent = _agent(env)
    _set(agent, _exclusive("a", "team-a", "uid-A", [GPU0[0]]), _shared("b", "team-b", "uid-B", [GPU1[0]]))
    assert _values(env, GPU1) == [SHARED_VALUE] * 3
    # The agent dies; meanwhile team-b's claim is deallocated (its barrier never ran) and team-a's too,
    # but team-a's device is recorded mid-barrier.
    store = env.rt.barrier.deps.store
    state = store.load(GPU0[0])
    state.phase = Phase.DRAIN
    store.save(state)
    agent = Agent(env.restart(), clock=VirtualClock())
    agent.api_known = True
    agent._allocated = agent._map([])
    # Before the barriers finish: the lingering tenant (level unknown after the restart: strictest) keeps GPU 0.
    assert env.rt.isolation is not None
    values = env.rt.isolation.reconcile([], VirtualClock())
    assert values["GPU-sim-0000"] == "team-a"
    agent.startup()
    agent.wait()
    assert _values(env, GPU0 + GPU1) == [None] * 6  # barriers done: nothing held, every rule swept


def test_a_shared_device_of_two_namespaces_keeps_both_tenants_until_its_barrier_ends(tmp_path: Path) -> None:
    """A device co-held by claims of two namespaces stores no single tenant namespace; both linger mid-barrier."""
    env = _env(tmp_path)
    agent = _agent(env)
    store = env.rt.barrier.deps.store
    state = store.load(GPU0[0])
    state.phase, state.claim, state.tenant_namespace = Phase.DRAIN, "team-a/a, team-b/b", None
    store.save(state)
    assert env.rt.isolation is not None
    values = env.rt.isolation.reconcile([], VirtualClock())
    assert values["GPU-sim-0000"] == CONFLICT_VALUE  # levels unknown (strictest), two tenants: nobody new
    assert _values(env, GPU0) == [CONFLICT_VALUE] * 3
    del agent


def test_dynamic_mig_taints_every_placement_and_the_whole_gpu(tmp_path: Path) -> None:
    env = _env(tmp_path, SimulatedBackendSettings(gpus=1, dynamic_mig=True, memory_bytes=1024), dynamic_mig=True)
    env.node = SimulatedNode(env.config.simulated, env.faults, whole_gpu=True)  # Hopper: gpu-0 beside the placements
    agent = _agent(env)
    devices = sorted(env.rt.barrier.deps.inventory)
    placement = next(d for d in devices if "-mig-1g" in d)
    env.node.prepare(placement)
    _set(agent, _exclusive("a", "team-a", "uid-A", [placement]))
    assert "gpu-0" in devices and _values(env, devices) == ["team-a"] * len(devices)


def test_exclusive_claim_reads_every_request_shape() -> None:
    own = own_toleration("team-a")
    v1 = {"metadata": {"namespace": "team-a"},
          "spec": {"devices": {"requests": [{"name": "mig", "exactly": {"tolerations": [own]}}]}}}
    beta1 = {"metadata": {"namespace": "team-a"}, "spec": {"devices": {"requests": [
        {"name": "mig", "tolerations": [own]}]}}}
    first = {"metadata": {"namespace": "team-a"}, "spec": {"devices": {"requests": [
        {"name": "mig", "firstAvailable": [{"name": "small", "tolerations": []}, {"name": "big", "tolerations": [own]}]}
    ]}}}
    assert exclusive_claim(v1, "mig") and exclusive_claim(beta1, "mig") and exclusive_claim(first, "mig/big")
    assert not exclusive_claim(first, "mig/small") and not exclusive_claim(v1, "other")
    other = {"metadata": {"namespace": "team-b"}, "spec": v1["spec"]}
    assert not exclusive_claim(other, "mig")  # another tenant's value is not its own isolation


def test_no_isolation_calls_where_the_server_does_not_serve_taint_rules(tmp_path: Path) -> None:
    env = _env(tmp_path)
    env.kube.serve_taint_rules = False
    agent = _agent(env)
    env.rt.guard._missing_api = True  # what the guard's discovery concluded (the gate is off)
    _set(agent, _exclusive("a", "team-a", "uid-A", [GPU0[0]]))
    assert _values(env, GPU0) == [None] * 3
    assert b"dra_sanitizer_isolation_taint_failures_total 0.0" in env.rt.metrics.render()


def test_a_corrupt_state_keeps_its_gpu_closed_for_an_unknown_tenant(tmp_path: Path) -> None:
    """Review finding 4: a state file that cannot be read may have held anyone: the GPU keeps its taint."""
    from dra_constructs.agent.isolation import UNKNOWN_TENANT

    env = _env(tmp_path)
    agent = _agent(env)
    assert env.rt.isolation is not None
    store = env.rt.barrier.deps.store
    path = store._path(GPU0[1])
    assert path.exists() and store.unreadable(GPU0[1]) is None
    path.write_text('{"device": "gpu-0-mig-1g10gb-19-1", "phase": "quaran')  # torn or corrupted
    assert store.unreadable(GPU0[1]) is not None and store.load(GPU0[1]).phase is Phase.UNKNOWN
    values = env.rt.isolation.reconcile([], VirtualClock())
    assert values["GPU-sim-0000"] == UNKNOWN_TENANT and values["GPU-sim-0001"] is None
    assert _values(env, GPU0) == [UNKNOWN_TENANT] * 3 and _values(env, GPU1) == [None] * 3
    b = _shared("infer-b", "team-b", "uid-B", [GPU0[2]])
    assert env.rt.isolation.reconcile([b], VirtualClock())["GPU-sim-0000"] == CONFLICT_VALUE  # nobody new joins
    assert not any(e["reason"] == "IsolationBreached" for e in env.kube.events)  # no allocation raced anything
    path.write_bytes(store.load(GPU0[0]).model_copy(update={"device": GPU0[1]}).model_dump_json().encode())
    assert env.rt.isolation.reconcile([], VirtualClock())["GPU-sim-0000"] is None  # the state is back: lifted
    assert _values(env, GPU0) == [None] * 3
    del agent


def test_an_isolation_rule_deleted_by_hand_is_applied_again(tmp_path: Path) -> None:
    """Review finding 5: the agent does not wait for the GPU's value to change to restore its rule."""
    env = _env(tmp_path)
    agent = _agent(env)
    a = _exclusive("train-a", "team-a", "uid-A", [GPU0[0]])
    _set(agent, a)
    assert _values(env, GPU0) == ["team-a"] * 3
    env.kube.delete_taint_rule("resource.k8s.io/v1alpha3", isolation_rule_name("node-a", GPU0[1]))
    edited = env.kube.rules[isolation_rule_name("node-a", GPU0[2])]
    edited["spec"]["taint"]["value"] = "team-b"  # edited by hand: a team-b claim would tolerate it
    assert _values(env, GPU0) == ["team-a", None, "team-b"]
    agent.tick()  # the periodic reconcile (every reconcile_interval_s)
    agent.wait()
    assert _values(env, GPU0) == ["team-a"] * 3
    events = [e for e in env.kube.events if e["reason"] == "IsolationTaintRestored"]
    assert len(events) == 2 and all(e["type"] == "Warning" for e in events)
    assert any("deleted" in e["message"] for e in events) and any("value changed to team-b" in e["message"]
                                                                  for e in events)
    assert b"dra_sanitizer_isolation_taints_restored_total 2.0" in env.rt.metrics.render()
    agent.tick()
    agent.wait()
    assert len([e for e in env.kube.events if e["reason"] == "IsolationTaintRestored"]) == 2  # nothing more to do
