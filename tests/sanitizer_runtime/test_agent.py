"""The agent loop: API down at start (item 3), claims on devices it did not enumerate (item 1)."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.backends.base import ComputeMode, EnumerationError
from dra_constructs.agent.backends.simulated import FaultInjector, SimulatedNode
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import AgentConfig, KubeSettings, SimulatedBackendSettings
from dra_constructs.agent.runtime import Runtime, build_runtime
from dra_constructs.agent.state import Phase

from .conftest import sim_config
from .fakeapi import FakeApi, claim

CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"


def _config(api: FakeApi, tmp_path: Path) -> AgentConfig:
    return sim_config(tmp_path, version="1.34").model_copy(update={
        "metrics_port": 0, "metrics_address": "127.0.0.1",
        "kube": KubeSettings(mode="url", url=api.url, kubernetes_version="1.34", retries=1, retry_backoff_s=0.01,
                             request_timeout_s=0.5, watch_timeout_s=1)})


P9 = "9a9b9c9d-0000-4000-8000-000000000009"  # a pod UID as the API server makes them (a UUID)


def _evidence(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "evidence.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _allocated_agent(api: FakeApi, tmp_path: Path) -> tuple[Runtime, str, list[int]]:
    """A first agent: every device sanitized, then one allocated to a live tenant."""
    rt = build_runtime(_config(api, tmp_path), fsync=False)
    assert rt.node is not None
    agent = Agent(rt, clock=VirtualClock())
    device = rt.devices[0].name
    api.claims = [claim("c1", "team-a", "u1", [device], reserved=["p1"])]
    assert agent.initial_list()
    agent.startup()
    assert rt.barrier.deps.store.load(device).phase is Phase.ALLOCATED
    pids = rt.node.start_tenant(device, [("obey", 1.0)], random.Random(2))
    agent._pool.shutdown(wait=True)
    return rt, device, pids


def test_api_down_at_start_keeps_the_guards_and_kills_nobody(fake_api: FakeApi, tmp_path: Path) -> None:
    first, device, pids = _allocated_agent(fake_api, tmp_path)
    records_before = len(_evidence(tmp_path))
    # The agent restarts while the API server is unreachable (503 on every list for a while).
    fake_api.fail("GET", CLAIMS, *([503] * 6))
    rt = build_runtime(_config(fake_api, tmp_path), node=first.node, fsync=False)
    agent = Agent(rt, reconcile_interval_s=0.05, clock=VirtualClock())
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not agent.ready() and time.monotonic() < deadline:
            assert first.node is not None and first.node.audit(device).live_contexts == len(pids)
            time.sleep(0.02)
        assert agent.ready(), "the claims watch never recovered"
    finally:
        agent.stop.set()
        thread.join(timeout=20)
    assert first.node is not None
    assert first.node.audit(device).live_contexts == len(pids)  # the tenant lives: nobody was killed
    assert rt.barrier.deps.store.load(device).phase is Phase.ALLOCATED
    assert fake_api.rules[f"dra-sanitizer-node-a-{device}"]["spec"]["taint"]["value"] == "in-use"
    new = _evidence(tmp_path)[records_before:]
    assert all(r["device"] != device for r in new), new  # no barrier on the allocated device
    assert sum(1 for m, p in fake_api.requests if m == "GET" and p == CLAIMS) > 1  # it retried


def test_a_claim_on_an_unknown_device_is_alerted_and_guarded(fake_api: FakeApi, tmp_path: Path) -> None:
    rt = build_runtime(_config(fake_api, tmp_path), fsync=False)
    assert rt.node is not None
    agent = Agent(rt, clock=VirtualClock())
    assert agent.initial_list()
    agent.startup()
    late = "gpu-0-mig-1g10gb-19-6"  # a MIG instance created after the agent started
    assert late not in {d.name for d in rt.devices}
    rt.node.enumeration_errors = [EnumerationError(0, "nvmlDeviceGetMigDeviceHandleByIndex", "NVML_ERROR_NO_PERMISSION",
                                                   minor=0, gpu_instance_id=13)]
    agent._claims = {"u9": claim("c9", "team-b", "u9", [late], reserved=[P9])}
    agent.reconcile()
    rule = fake_api.rules[f"dra-sanitizer-node-a-{late}"]
    assert rule["spec"]["taint"]["value"] == "unmapped"
    event = next(e for e in fake_api.events if e["reason"] == "UnmappedDevice")
    assert "team-b/c9" in event["message"] and "NO_PERMISSION" in event["message"]
    assert b'dra_sanitizer_unmapped_claim_devices{device="gpu-0-mig-1g10gb-19-6"} 1.0' in rt.metrics.render()
    agent.reconcile()  # alerted once per claim
    assert sum(1 for e in fake_api.events if e["reason"] == "UnmappedDevice") == 1
    # The instance becomes visible (the enumeration error is gone): re-enumerated, guarded as in-use.
    rt.node.enumeration_errors = []
    rt.node.add_mig_device(0, 6)
    agent.reconcile()
    assert rt.barrier.deps.store.load(late).phase is Phase.ALLOCATED
    assert fake_api.rules[f"dra-sanitizer-node-a-{late}"]["spec"]["taint"]["value"] == "in-use"
    assert b'dra_sanitizer_unmapped_claim_devices{device="gpu-0-mig-1g10gb-19-6"} 0.0' in rt.metrics.render()
    rt.node.start_tenant(late, [("obey", 2.0)], random.Random(3), pod=P9)
    agent._claims = {}
    agent.reconcile()  # released: the barrier runs on the late device like on any other
    agent.wait()
    assert rt.barrier.deps.store.load(late).phase is Phase.CLEAN and rt.node.audit(late).clean
    assert f"dra-sanitizer-node-a-{late}" not in fake_api.rules


def test_a_free_device_created_after_start_is_sanitized_before_use(fake_api: FakeApi, tmp_path: Path) -> None:
    rt = build_runtime(_config(fake_api, tmp_path), fsync=False)
    assert rt.node is not None
    agent = Agent(rt, clock=VirtualClock())
    assert agent.initial_list()
    agent.startup()
    info = rt.node.add_mig_device(0, 5)
    rt.node.start_tenant(info.name, [], random.Random(4))  # residue of whoever used that memory before
    agent.tick()
    agent.wait()
    assert rt.barrier.deps.store.load(info.name, info.uuid).phase is Phase.CLEAN
    assert rt.node.audit(info.name).clean
    assert any(r["device"] == info.name and r["result"] == "released" for r in _evidence(tmp_path))


def test_a_bug_in_reconcile_does_not_end_the_claims_watch(fake_api: FakeApi, tmp_path: Path) -> None:
    """An unexpected exception in a reconcile must not silently stop the watch (no more barriers, still 'healthy')."""
    rt = build_runtime(_config(fake_api, tmp_path), fsync=False)
    agent = Agent(rt, clock=VirtualClock())
    calls: list[int] = []

    def changed() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("bug")
        agent.stop.set()

    def watch(_version: str) -> Any:
        yield "MODIFIED", {"metadata": {"uid": "u1", "resourceVersion": "2"}}

    thread = threading.Thread(target=agent._watch_loop, args=(lambda: ([], "1"), watch, {}, changed, "claims"),
                              daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive() and len(calls) == 2  # re-listed and reconciled again after the bug


def test_api_down_at_first_start_guards_never_sanitized_devices_by_compute_mode(fake_api: FakeApi,
                                                                                tmp_path: Path) -> None:
    """No saved state, claims unknown: PROHIBITED on every device, nobody killed; the API decides later."""
    config = _config(fake_api, tmp_path)
    modes: list[tuple[str, ComputeMode]] = []
    node = SimulatedNode(config.simulated, on_compute_mode=lambda name, mode: modes.append((name, mode)))
    rt = build_runtime(config, node=node, fsync=False)
    free, held = (d.name for d in rt.devices)
    node.start_tenant(free, [], random.Random(5))  # whoever used it before the agent ever ran left residue
    pids = node.start_tenant(held, [("obey", 1.0)], random.Random(6))  # a tenant whose claim is live
    fake_api.claims = [claim("c1", "team-a", "u1", [held], reserved=["p1"])]
    fake_api.fail("GET", CLAIMS, 503, 503)
    agent = Agent(rt, reconcile_interval_s=0.05, clock=VirtualClock())
    assert not agent.initial_list()
    agent.startup()
    agent.wait()
    # Guarded locally: no new context on either device; nobody signalled, no barrier ran.
    assert node.compute_mode(free) is ComputeMode.PROHIBITED and node.compute_mode(held) is ComputeMode.PROHIBITED
    assert node.audit(held).live_contexts == len(pids) and _evidence(tmp_path) == []
    assert all(rt.barrier.deps.store.load(n).local_guard for n in (free, held))
    assert b'dra_sanitizer_unknown_devices_without_api{guard="compute-mode"} 2.0' in rt.metrics.render()
    assert fake_api.rules == {}  # no taint without the API
    # The API answers again: the claims watch's first list runs the normal startup recovery.
    fake_api.fail("GET", CLAIMS, 503, 503)  # run()'s own first list fails too: the watch recovers
    thread = threading.Thread(target=agent.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while not agent.ready() and time.monotonic() < deadline:
            assert node.audit(held).live_contexts == len(pids)
            time.sleep(0.02)
        assert agent.ready(), "the claims watch never recovered"
        agent.wait()
    finally:
        agent.stop.set()
        thread.join(timeout=20)
    store = rt.barrier.deps.store
    # Free: sanitized and released before anyone got it.
    assert store.load(free).phase is Phase.CLEAN and node.audit(free).clean
    assert node.compute_mode(free) is ComputeMode.DEFAULT
    assert [(r["trigger"], r["result"]) for r in _evidence(tmp_path) if r["device"] == free] == [
        ("startup-unknown", "released")]
    assert modes.index((free, ComputeMode.PROHIBITED)) < modes.index((free, ComputeMode.EXCLUSIVE_PROCESS))
    # Held: guarded by its in-use taint, its tenant alive and able to create contexts again.
    assert store.load(held).phase is Phase.ALLOCATED and not store.load(held).local_guard
    assert node.audit(held).live_contexts == len(pids)
    assert fake_api.rules[f"dra-sanitizer-node-a-{held}"]["spec"]["taint"]["value"] == "in-use"
    assert node.compute_mode(held) is ComputeMode.DEFAULT
    assert all(r["device"] != held for r in _evidence(tmp_path))
    events = {e["message"].split(":", 1)[0]: e for e in fake_api.events if e["reason"] == "LocalGuardResolved"}
    assert "held by claim team-a/c1" in events[held]["message"] and events[held]["type"] == "Normal"
    assert "free: sanitized and released" in events[free]["message"]
    assert b'dra_sanitizer_unknown_devices_without_api{guard="compute-mode"} 0.0' in rt.metrics.render()


def test_a_local_guard_nvml_refused_is_retried_while_the_api_is_down(fake_api: FakeApi, tmp_path: Path) -> None:
    """NVML refuses PROHIBITED at start: alerted (metric), retried each tick until it holds."""
    rt = build_runtime(_config(fake_api, tmp_path), fsync=False)
    assert rt.node is not None
    fake_api.fail("GET", CLAIMS, 503, 503)
    rt.node.faults = FaultInjector(rates={"nvml.set_compute_mode": 1.0})
    agent = Agent(rt, clock=VirtualClock())
    assert not agent.initial_list()
    agent.startup()
    assert b'dra_sanitizer_unknown_devices_without_api{guard="failed"} 2.0' in rt.metrics.render()
    assert all(rt.node.compute_mode(d.name) is ComputeMode.DEFAULT for d in rt.devices)
    rt.node.faults = FaultInjector()
    agent.tick()
    assert all(rt.node.compute_mode(d.name) is ComputeMode.PROHIBITED for d in rt.devices)
    assert b'dra_sanitizer_unknown_devices_without_api{guard="failed"} 0.0' in rt.metrics.render()
    assert _evidence(tmp_path) == []


def test_api_down_dynamic_mig_guards_the_instances_that_exist_and_those_that_appear(fake_api: FakeApi,
                                                                                     tmp_path: Path) -> None:
    """DynamicMIG: a placement's compute mode lives on its instance; one the driver creates later is guarded too."""
    config = _config(fake_api, tmp_path).model_copy(update={
        "simulated": SimulatedBackendSettings(gpus=1, dynamic_mig=True, memory_bytes=1024)})
    node = SimulatedNode(config.simulated)
    rt = build_runtime(config, node=node, fsync=False)
    held, late = "gpu-0-mig-1g10gb-19-3", "gpu-0-mig-1g10gb-19-5"
    node.prepare(held)  # the driver prepared a claim before the agent ever ran
    pids = node.start_tenant(held, [("obey", 1.0)], random.Random(7), exited_residue=False)
    fake_api.fail("GET", CLAIMS, 503, 503)
    agent = Agent(rt, clock=VirtualClock())
    assert not agent.initial_list()
    agent.startup()
    assert node.compute_mode(held) is ComputeMode.PROHIBITED and node.audit(held).live_contexts == len(pids)
    metrics = rt.metrics.render()
    assert b'unknown_devices_without_api{guard="compute-mode"} 1.0' in metrics
    assert b'unknown_devices_without_api{guard="no-instance"} 12.0' in metrics
    node.prepare(late)  # the scheduler still works: the driver creates an instance (in DEFAULT) for a new claim
    assert node.compute_mode(late) is ComputeMode.DEFAULT
    agent.tick()
    assert node.compute_mode(late) is ComputeMode.PROHIBITED  # no context on unproven memory
    assert b'unknown_devices_without_api{guard="compute-mode"} 2.0' in rt.metrics.render()
    assert _evidence(tmp_path) == []
    # The API answers: both are held by live claims; every other placement is sanitized.
    agent._claims = {"u1": claim("c1", "team-a", "u1", [held]), "u2": claim("c2", "team-b", "u2", [late])}
    agent.reconcile()
    agent.wait()
    assert node.compute_mode(held) is ComputeMode.DEFAULT and node.compute_mode(late) is ComputeMode.DEFAULT
    assert node.audit(held).live_contexts == len(pids)
    store = rt.barrier.deps.store
    assert store.load(held).phase is store.load(late).phase is Phase.ALLOCATED
    devices = {d.name: d for d in rt.devices}
    results = {r["device"]: (r["result"], r["reason"]) for r in _evidence(tmp_path)}
    assert set(results) == set(devices) - {held, late}  # a barrier on each free placement, none on the held ones
    for name, (result, reason) in results.items():
        # A placement over a live instance's slices cannot get a transient instance: quarantined, as at
        # any first start (fails closed); the others are sanitized and released.
        over_live = devices[name].overlaps(devices[held]) or devices[name].overlaps(devices[late])
        assert (result, store.load(name).phase) == (
            ("quarantined", Phase.QUARANTINED) if over_live else ("released", Phase.CLEAN)), name
        assert not over_live or "INSUFFICIENT_RESOURCES" in reason
