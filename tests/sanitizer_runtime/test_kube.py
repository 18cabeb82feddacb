"""The Kubernetes client against a local API server on 127.0.0.1: 409, 410, 5xx, timeouts."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import KubeSettings
from dra_constructs.agent.guard import Guard, GuardError
from dra_constructs.agent.kube import ApiError, KubeClient, allocated_devices, retrying
from dra_constructs.agent.runtime import build_runtime
from dra_constructs.agent.state import Phase
from dra_constructs.target import Target

from .conftest import sim_config
from .fakeapi import FakeApi, claim


def _client(api: FakeApi) -> KubeClient:
    return KubeClient(KubeSettings(mode="url", url=api.url, request_timeout_s=0.5, watch_timeout_s=1))


def _guard(api: FakeApi, version: str = "1.34", retries: int = 3, event_namespace: str = "default") -> Guard:
    return Guard(_client(api), Target.parse(version), "node-a", key="sanitizer.dra-constructs.io/barrier",
                 effect="NoSchedule", retries=retries, backoff_s=0.01, event_namespace=event_namespace)


def test_taint_create_then_conflict_replaces(fake_api: FakeApi) -> None:
    guard, clock = _guard(fake_api), VirtualClock()
    assert guard.taint("gpu-0", "in-use", clock)
    assert guard.taint("gpu-0", "quarantined", clock, reason="verify found 3 non-zero words")  # 409 -> GET, PUT
    rule = fake_api.rules["dra-sanitizer-node-a-gpu-0"]
    assert rule["apiVersion"] == "resource.k8s.io/v1alpha3" and rule["spec"]["taint"]["value"] == "quarantined"
    methods = [m for m, p in fake_api.requests if "devicetaintrules" in p]
    assert methods == ["POST", "POST", "GET", "PUT"]


def test_replace_conflict_and_server_errors_are_retried(fake_api: FakeApi) -> None:
    guard, clock = _guard(fake_api), VirtualClock()
    guard.taint("gpu-1", "in-use", clock)
    fake_api.fail("PUT", "/apis/resource.k8s.io/v1alpha3/devicetaintrules/", 409)
    fake_api.fail("POST", "/apis/resource.k8s.io/v1alpha3/devicetaintrules", 503, 500)
    assert guard.taint("gpu-1", "sanitizing", clock)
    assert fake_api.rules["dra-sanitizer-node-a-gpu-1"]["spec"]["taint"]["value"] == "sanitizing"
    assert clock.monotonic() > 0  # the backoff ran on the injected clock


def test_timeouts_are_retried_then_give_up(fake_api: FakeApi) -> None:
    guard, clock = _guard(fake_api, retries=1), VirtualClock()
    fake_api.fail("POST", "/apis/resource.k8s.io/v1alpha3/devicetaintrules", "timeout")
    assert guard.taint("gpu-2", "in-use", clock)  # one timeout, then success
    fake_api.fail("DELETE", "/apis/resource.k8s.io/v1alpha3/devicetaintrules/", 500, 502)
    with pytest.raises(GuardError, match="502"):
        guard.untaint("gpu-2", clock)
    assert "dra-sanitizer-node-a-gpu-2" in fake_api.rules  # still guarded
    assert guard.untaint("gpu-2", clock) and fake_api.rules == {}
    assert guard.untaint("gpu-2", clock)  # already gone (404) is fine


def test_missing_devicetaintrule_api_falls_back_to_compute_mode(fake_api: FakeApi) -> None:
    fake_api.serve_taint_rules = False  # DRADeviceTaintRules gate off
    guard = _guard(fake_api, version="1.36")
    assert guard.has_taints and not guard.taint("gpu-0", "in-use", VirtualClock())
    assert not guard.has_taints and "gate off" in guard.describe("gpu-0")


def test_events_are_posted_about_the_node(fake_api: FakeApi) -> None:
    assert _guard(fake_api).event("gpu-0", "DeviceQuarantined", "drain timeout", VirtualClock())
    event = fake_api.events[0]
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a"}
    assert event["reason"] == "DeviceQuarantined" and event["message"] == "gpu-0: drain timeout"
    fake_api.fail("POST", "/api/v1/namespaces/default/events", 500, 500, 500, 500)
    assert not _guard(fake_api).event("gpu-0", "DeviceQuarantined", "x", VirtualClock())


def test_events_outside_default_name_their_namespace_on_the_node(fake_api: FakeApi) -> None:
    """The construct's agent posts into its own namespace: the API server then wants it on the object too."""
    guard = _guard(fake_api, event_namespace="dra-sanitizer")
    assert guard.event("gpu-0", "DeviceQuarantined", "drain timeout", VirtualClock())
    assert fake_api.events[0]["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "node-a",
                                                    "namespace": "dra-sanitizer"}
    assert fake_api.events[0]["metadata"]["namespace"] == "dra-sanitizer"


def test_list_watch_and_expired_watch(fake_api: FakeApi) -> None:
    client = _client(fake_api)
    fake_api.claims = [claim("c1", "team-a", "u1", ["gpu-0"]), claim("c2", "team-b", "u2", ["gpu-1"], node="other")]
    items, version = client.list_claims("v1")
    assert len(items) == 2 and version
    assert allocated_devices(items, "node-a") == {"gpu-0": allocated_devices(items[:1], "node-a")["gpu-0"]}
    assert allocated_devices(items, "node-a")["gpu-0"].namespace == "team-a"
    fake_api.claim_events = [{"type": "DELETED", "object": items[0]}]
    assert [kind for kind, _ in client.watch_claims("v1", version)] == ["DELETED"]
    fake_api.fail("GET", "/apis/resource.k8s.io/v1/resourceclaims", "gone")
    with pytest.raises(ApiError) as info:
        list(client.watch_claims("v1", version))
    assert info.value.status == 410
    assert client.server_version() == "1.34"
    fake_api.pods = [{"metadata": {"name": "p", "uid": "u9", "namespace": "team-a"}}]
    assert client.list_pods("node-a")[0][0]["metadata"]["uid"] == "u9"


def test_retrying_does_not_retry_client_errors() -> None:
    calls = []

    def bad() -> None:
        calls.append(1)
        raise ApiError(403, "forbidden")

    with pytest.raises(ApiError):
        retrying(bad, VirtualClock(), 5, 0.1)
    assert calls == [1]


def test_agent_guards_allocations_and_sanitizes_releases(fake_api: FakeApi, tmp_path: Path) -> None:
    config = sim_config(tmp_path, version="1.34").model_copy(update={"kube": KubeSettings(
        mode="url", url=fake_api.url, kubernetes_version="1.34", retries=2, retry_backoff_s=0.01,
        request_timeout_s=0.5, watch_timeout_s=1)})
    rt = build_runtime(config, fsync=False)
    assert rt.node is not None
    agent = Agent(rt)
    assert agent.initial_list()  # the API answers: allocations are known
    agent.startup()  # never-seen devices are sanitized first
    assert {rt.barrier.deps.store.load(d.name).phase for d in rt.devices} == {Phase.CLEAN}
    device = rt.devices[0].name
    pod = "11111111-2222-4333-8444-555555555555"
    agent._claims = {"u1": claim("c1", "team-a", "u1", [device], reserved=[pod])}
    agent.reconcile()
    assert rt.barrier.deps.store.load(device).phase is Phase.ALLOCATED
    assert fake_api.rules[f"dra-sanitizer-node-a-{device}"]["spec"]["taint"]["value"] == "in-use"
    rt.node.start_tenant(device, [("obey", 3.0)], random.Random(1), pod=pod)
    agent._claims = {}
    agent.reconcile()  # deallocated: barrier
    agent._pool.shutdown(wait=True)
    assert rt.barrier.deps.store.load(device).phase is Phase.CLEAN
    assert rt.node.audit(device).clean and fake_api.rules == {}


def test_a_rule_deleted_between_409_and_get_is_created_again(fake_api: FakeApi) -> None:
    """Review r14: create 409 (it exists), then an operator deletes it, GET 404: not a missing API."""
    guard, clock = _guard(fake_api, retries=0), VirtualClock()
    assert guard.taint("gpu-1", "in-use", clock)
    fake_api.fail("GET", "/apis/resource.k8s.io/v1alpha3/devicetaintrules/", 404)  # the object, gone meanwhile
    assert guard.taint("gpu-1", "quarantined", clock, "re-apply")
    assert guard.has_taints  # discovery still lists devicetaintrules
    assert fake_api.rules["dra-sanitizer-node-a-gpu-1"]["spec"]["taint"]["value"] == "quarantined"
    assert guard.taint("gpu-0", "in-use", clock) and "dra-sanitizer-node-a-gpu-0" in fake_api.rules
    assert guard.untaint("gpu-1", clock) and "dra-sanitizer-node-a-gpu-1" not in fake_api.rules  # no stale rule


def test_a_404_while_the_kind_is_served_is_an_error_not_a_fallback(fake_api: FakeApi) -> None:
    guard, clock = _guard(fake_api, retries=0), VirtualClock()
    fake_api.fail("POST", "/apis/resource.k8s.io/v1alpha3/devicetaintrules", 404)
    with pytest.raises(GuardError, match="404"):
        guard.taint("gpu-0", "in-use", clock)
    assert guard.has_taints and guard.taint("gpu-0", "in-use", clock)  # the next try places it


def test_taint_rules_are_listed_by_label(fake_api: FakeApi) -> None:
    """The isolation reconcile's LIST (finding 5): ``labelSelector`` as kube-apiserver takes it (equality terms)."""
    client = _client(fake_api)
    guard = _guard(fake_api)
    assert guard.taint("gpu-0", "in-use", VirtualClock())
    selector = "app.kubernetes.io/managed-by=dra-sanitizer,sanitizer.dra-constructs.io/node=node-a"
    (rule,) = client.list_taint_rules("resource.k8s.io/v1alpha3", selector)
    assert rule["metadata"]["name"] == "dra-sanitizer-node-a-gpu-0"
    assert client.list_taint_rules("resource.k8s.io/v1alpha3", "sanitizer.dra-constructs.io/node=node-b") == []
    assert ("GET", "/apis/resource.k8s.io/v1alpha3/devicetaintrules") in [
        (m, p.partition("?")[0]) for m, p in fake_api.requests]
