"""An Event per device state transition (issue 23 item 5): what ``kubectl get events`` shows."""

from __future__ import annotations

import random
from typing import Any

from dra_constructs.agent.backends.simulated import FaultInjector
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.kube import Tenant
from dra_constructs.agent.lifecycle import BURST, REFILL_S, Lifecycle
from dra_constructs.agent.taints import device_labels

from .conftest import SimEnv

POD = "0c4e5f1a-7d2b-4c9e-9a41-5b7e2f3d8c10"
TENANT = Tenant("team-a/claim-1", "team-a", "uid-1", pods=(POD,))
LIFECYCLE = ("DeviceInUse", "DeviceSanitizing", "DeviceReleased", "DeviceQuarantined")


def _transitions(env: SimEnv, device: str) -> list[tuple[str, str, str]]:
    return [(e["reason"], e["type"], e["message"]) for e in env.kube.events
            if e["reason"] in LIFECYCLE and e["message"].startswith(f"{device}:")]


def _claim_cycle(env: SimEnv, behaviour: str = "obey") -> Any:
    env.rt.barrier.mark_allocated(env.device, TENANT)
    env.node.start_tenant(env.device.name, [(behaviour, 1.0)], random.Random(0), pod=POD)
    return env.rt.barrier.run(env.device, "deallocated", TENANT)


def test_a_claim_lifecycle_posts_in_use_sanitizing_released_once_each(sim: SimEnv) -> None:
    sim.rt.barrier.run(sim.device, "startup-unknown")
    name = sim.device.name
    assert [t[0] for t in _transitions(sim, name)] == ["DeviceSanitizing", "DeviceReleased"]
    sim.kube.events.clear()
    sim.rt.barrier.mark_allocated(sim.device, TENANT)
    sim.rt.barrier.mark_allocated(sim.device, TENANT)  # the in-use taint re-applied: no second Event
    assert _claim_cycle(sim).result == "released"
    assert _transitions(sim, name) == [
        ("DeviceInUse", "Normal", f"{name}: available -> in-use"),
        ("DeviceSanitizing", "Normal", f"{name}: in-use -> sanitizing"),
        ("DeviceReleased", "Normal", f"{name}: sanitizing -> available"),
    ]
    event = next(e for e in sim.kube.events if e["reason"] == "DeviceReleased")
    assert event["involvedObject"]["kind"] == "Node" and event["source"]["component"] == "dra-sanitizer"
    assert sim.rt.metrics.registry.get_sample_value(
        "dra_sanitizer_lifecycle_events_total", {"reason": "DeviceReleased", "outcome": "posted"}) == 2


def test_a_quarantine_is_announced_once_and_a_reapplied_one_not_again(sim: SimEnv) -> None:
    sim.rt.barrier.run(sim.device, "startup-unknown")
    sim.kube.events.clear()
    assert _claim_cycle(sim, "unkillable").result == "quarantined"
    reasons = [t[:2] for t in _transitions(sim, sim.device.name)]
    assert reasons == [("DeviceInUse", "Normal"), ("DeviceSanitizing", "Normal"), ("DeviceQuarantined", "Warning")]
    sim.kube.events.clear()
    sim.rt.guard.taint(sim.device.name, "quarantined", sim.rt.barrier.deps.clock_for(sim.device.name), "again")
    assert _transitions(sim, sim.device.name) == []


def test_an_agent_restart_does_not_reannounce_every_device(sim: SimEnv) -> None:
    for device in sim.rt.devices:
        sim.rt.barrier.run(device, "startup-unknown")
    sim.rt.barrier.mark_allocated(sim.device, TENANT)
    sim.kube.events.clear()
    sim.restart()  # seeded from the state files: gpu-0's slices clean, one in use
    for device in sim.rt.devices[1:]:
        sim.rt.guard.untaint(device.name, sim.rt.barrier.deps.clock_for(device.name))
    sim.rt.barrier.mark_allocated(sim.rt.devices[0], TENANT)
    assert [e["reason"] for e in sim.kube.events if e["reason"] in LIFECYCLE] == []


def test_without_device_taints_the_events_still_tell_the_state(tmp_path: Any) -> None:
    env = SimEnv(tmp_path, version="1.32")  # no DeviceTaintRule: Events are the only cluster-side trace
    env.rt.barrier.run(env.device, "startup-unknown")
    env.kube.events.clear()
    assert _claim_cycle(env).result == "released"
    assert [t[0] for t in _transitions(env, env.device.name)] == ["DeviceInUse", "DeviceSanitizing", "DeviceReleased"]
    assert env.kube.rules == {}


def test_a_flapping_device_is_rate_limited_and_the_next_event_counts_what_was_left_out() -> None:
    posted: list[tuple[str, str, str]] = []

    def post(device: str, reason: str, message: str, _clock: Any, _warning: bool) -> bool:
        posted.append((device, reason, message))
        return True

    clock = VirtualClock()
    counted: list[tuple[str, str]] = []
    lifecycle = Lifecycle(post, count=lambda reason, outcome: counted.append((reason, outcome)))
    for _ in range(10):  # 20 transitions at one instant
        lifecycle.note("gpu-0", "sanitizing", clock)
        lifecycle.note("gpu-0", "available", clock)
    assert len(posted) == BURST
    assert sum(1 for c in counted if c[1] == "rate-limited") == 20 - BURST
    lifecycle.note("gpu-1", "in-use", clock)  # another device has its own budget
    assert posted[-1][0] == "gpu-1"
    clock.sleep(REFILL_S)
    lifecycle.note("gpu-0", "in-use", clock)
    assert posted[-1] == ("gpu-0", "DeviceInUse",
                          f"available -> in-use ({20 - BURST} earlier transition(s) not posted: rate limit)")
    assert lifecycle.state("gpu-0") == "in-use"
    lifecycle.note("gpu-0", "overlap", clock)  # not a lifecycle state: ignored
    assert lifecycle.state("gpu-0") == "in-use"


def test_rules_and_events_carry_node_and_device_labels_for_kubectl(sim: SimEnv) -> None:
    sim.rt.barrier.mark_allocated(sim.device, TENANT)
    name = sim.device.name
    labels = {"app.kubernetes.io/managed-by": "dra-sanitizer", "sanitizer.dra-constructs.io/node": "node-a",
              "sanitizer.dra-constructs.io/device": name}
    assert sim.kube.tainted(name)["metadata"]["labels"] == labels
    assert next(e for e in sim.kube.events if e["reason"] == "DeviceInUse")["metadata"]["labels"] == labels
    long = "x" * 64  # not a label value: selected by the annotation only
    assert "sanitizer.dra-constructs.io/device" not in device_labels("node-a", long)
    assert "sanitizer.dra-constructs.io/node" not in device_labels("n" * 60 + ".example.com", "gpu-0")


def test_the_state_is_announced_even_when_the_taint_cannot_be_placed(tmp_path: Any) -> None:
    env = SimEnv(tmp_path, faults=FaultInjector(random.Random(0), {"kube.apply": 1.0}))  # every apply fails
    env.rt.barrier.run(env.device, "startup-unknown")
    env.kube.events.clear()
    record = _claim_cycle(env)
    assert any("guard taint" in w for w in record.warnings) and env.kube.rules == {}
    assert [t[0] for t in _transitions(env, env.device.name)][:2] == ["DeviceInUse", "DeviceSanitizing"]
