"""The agent loop with the AMD backends on the stand-in (``test_amd_standin.py``'s harness) and the local API.

The AMD agent maps claims of ``gpu.amd.com`` (not ``gpu.nvidia.com``) and its DeviceTaintRules select
that driver; with the API down at its first start it has no local guard (AMD GPUs have no compute
mode): it says so, runs no barrier and signals nobody until the claims are known; a missed
turnover with the new tenant already running is reported and adopted, not quarantined.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dra_constructs.agent import turnover
from dra_constructs.agent.agent import Agent
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import KubeSettings
from dra_constructs.agent.kube import Holders
from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.state import Phase

from .fakeapi import FakeApi, claim
from .standin import cgroup
from .standin_amd import AmdNode, AmdTenant, MiB
from .test_amd_standin import _allocated_partition, _amd_runtime, amd_lib, node  # noqa: F401 - fixtures
from .test_standin_backends import POD
from .test_standin_devhandles import OTHER

CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
AMD = "gpu.amd.com"


def _kube(api: FakeApi) -> KubeSettings:
    return KubeSettings(mode="url", url=api.url, kubernetes_version="1.34", retries=0, retry_backoff_s=0.01,
                        request_timeout_s=0.5, watch_timeout_s=1)


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "evidence.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_the_amd_agent_guards_claims_of_the_amd_driver(tmp_path: Path, node: AmdNode,  # noqa: F811
                                                       fake_api: FakeApi) -> None:
    """A gpu.amd.com claim holds gpu-2-130: guarded (in-use taint selecting gpu.amd.com), never sanitized under
    it; a gpu.nvidia.com result naming gpu-1-129 is another driver's device, not this agent's."""
    node.residue_byte = 0x00
    node.fake_sysfs({0x0C00: 2})
    rt = _amd_runtime(tmp_path, node, kube=_kube(fake_api))
    fake_api.claims = [claim("c1", "team-a", "u1", ["gpu-2-130"], reserved=[POD], driver=AMD),
                       claim("c2", "team-b", "u2", ["gpu-1-129"], reserved=[OTHER])]
    agent = Agent(rt, clock=VirtualClock())
    assert agent.initial_list()
    agent.startup()
    agent.wait()
    store = rt.barrier.deps.store
    assert store.load("gpu-2-130").phase is Phase.ALLOCATED and store.load("gpu-2-130").claim == "team-a/c1"
    rule = fake_api.rules["dra-sanitizer-node-a-gpu-2-130"]["spec"]
    assert rule["deviceSelector"] == {"driver": AMD, "pool": "node-a", "device": "gpu-2-130"}
    assert rule["taint"]["value"] == "in-use"
    assert store.load("gpu-1-129").phase is Phase.CLEAN  # free for this driver: sanitized and released
    assert [(r["device"], r["trigger"], r["result"]) for r in _records(tmp_path)] == [
        ("gpu-1-129", "startup-unknown", "released")]


def test_api_down_at_first_start_amd_has_no_local_guard_runs_nothing_and_says_so(
        tmp_path: Path, node: AmdNode, fake_api: FakeApi) -> None:  # noqa: F811
    """No saved state, claims unknown: no compute mode to set. Nothing is recorded as guarded, no barrier runs
    (no cleaner shader, no fill), nobody is signalled; once the API answers the free partition is sanitized and
    the held one is guarded, with a Warning that no local guard existed meanwhile."""
    node.residue_byte = 0x00
    sysfs = node.fake_sysfs({0x0C00: 2})
    fake_api.fail("GET", CLAIMS, *([503] * 4))
    rt = _amd_runtime(tmp_path, node, kube=_kube(fake_api))
    tenant = AmdTenant(node, "GPU-00000000000000a1", nbytes=8 * MiB, ignore_term=True)  # a claim's, not yet known
    cgroup(node, tenant.pid, POD)  # type: ignore[arg-type]
    try:
        agent = Agent(rt, clock=VirtualClock())
        assert not agent.initial_list()
        agent.startup()
        agent.tick()
        agent.tick()
        agent.wait()
        assert tenant.alive() and _records(tmp_path) == [] and sysfs.cleaner(0x0C00) == ""
        store = rt.barrier.deps.store
        for name in ("gpu-1-129", "gpu-2-130"):
            state = store.load(name)
            assert state.phase is Phase.UNKNOWN and not state.local_guard  # never said guarded
        metrics = rt.metrics.render()
        assert b'dra_sanitizer_unknown_devices_without_api{guard="none"} 2.0' in metrics
        assert b'dra_sanitizer_unknown_devices_without_api{guard="failed"} 0.0' in metrics
        assert fake_api.rules == {}
        # The API answers: gpu-2-130 is held by a live claim, gpu-1-129 is free.
        fake_api.claims = [claim("c1", "team-a", "u1", ["gpu-2-130"], reserved=[POD], driver=AMD)]
        agent._claims = {"u1": fake_api.claims[0]}
        agent.reconcile()
        agent.wait()
        assert tenant.alive()
    finally:
        tenant.stop()
    assert [(r["device"], r["trigger"], r["result"]) for r in _records(tmp_path)] == [
        ("gpu-1-129", "startup-unknown", "released")]
    assert rt.barrier.deps.store.load("gpu-2-130").phase is Phase.ALLOCATED
    assert fake_api.rules["dra-sanitizer-node-a-gpu-2-130"]["spec"]["taint"]["value"] == "in-use"
    events = {e["message"].split(":", 1)[0]: e for e in fake_api.events if e["reason"] == "LocalGuardResolved"}
    held = events["gpu-2-130"]
    assert held["type"] == "Warning" and "no local guard existed" in held["message"]
    assert "compute mode" not in held["message"].replace("no compute mode on this backend", "")
    assert "free: sanitized and released" in events["gpu-1-129"]["message"]
    assert b'dra_sanitizer_unknown_devices_without_api{guard="none"} 0.0' in rt.metrics.render()


def _missed_turnover_to_team_b(rt: Any, device: Any, process: AmdTenant) -> Any:
    """The turnover resolved when team-b/c2 holds the partition that team-a/c1 held, ``process`` running on it
    throughout (stopped after)."""
    live = ClaimTenant("team-b/c2", "team-b", "u2", pods=(OTHER,))
    try:
        record = turnover.resolve(rt.barrier, device, turnover.stored_tenant(rt.barrier.deps.store.load(
            device.name)), Holders((live,)))
        assert process.alive()
    finally:
        process.stop()
    return record


def test_a_missed_turnover_with_the_new_tenant_running_is_adopted_not_quarantined(
        tmp_path: Path, node: AmdNode) -> None:  # noqa: F811
    """No compute mode to guard with is not "cannot list its processes": the new claim's process already runs
    on the partition, so nobody is killed and the turnover is reported (before: the barrier ran and
    quarantined the new tenant's partition as foreign contexts)."""
    rt, device, _before = _allocated_partition(tmp_path, node)
    tenant = AmdTenant(node, "GPU-00000000000000a1", nbytes=8 * MiB, ignore_term=True)
    cgroup(node, tenant.pid, OTHER)  # type: ignore[arg-type]
    record = _missed_turnover_to_team_b(rt, device, tenant)
    assert record.result == "adopted" and record.missed_turnover == "team-a/c1", record.reason
    assert [p["pid"] for p in record.foreign_processes] == [tenant.pid]
    state = rt.barrier.deps.store.load(device.name)
    assert state.phase is Phase.ALLOCATED and state.claim == "team-b/c2" and POD in state.pod_uids


def test_a_missed_turnover_whose_only_process_has_an_unreadable_owner_is_sanitized_not_adopted(
        tmp_path: Path, node: AmdNode) -> None:  # noqa: F811
    """An owner that cannot be read (the previous tenant's process exiting between the listing and the
    cgroup read) is no proof that the live tenant runs there: the barrier runs and keeps the partition
    guarded while the process is there, killing nobody (before: adopted, the new tenant admitted onto
    memory never sanitized). Found by the review of the AMD turnover change."""
    rt, device, _before = _allocated_partition(tmp_path, node)
    stranger = AmdTenant(node, "GPU-00000000000000a1", nbytes=8 * MiB, ignore_term=True)  # no cgroup file
    record = _missed_turnover_to_team_b(rt, device, stranger)
    assert record.result == "quarantined" and record.trigger == "missed-turnover", record.reason
    assert stranger.pid not in [*record.pids_sigterm, *record.pids_sigkill]
