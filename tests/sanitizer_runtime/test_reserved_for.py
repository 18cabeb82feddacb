"""``status.reservedFor`` pod UIDs are cross-checked before a process is signalled (review finding 5).

The process's pod is the node's word (its cgroup); that the pod uses the released claim is checked
against the agent's pods watch of this node (``Agent.pod_check``). A pod the watch knows that does not
reference the claim is never signalled: its processes are foreign contexts, the device stays guarded.
"""

from __future__ import annotations

import random
from typing import Any

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.kube import Tenant

from .conftest import SimEnv

POD = "4b1d3c2e-9f8a-4e7d-b6c5-a4f3e2d1c0b9"
TENANT = Tenant("team-a/claim-1", "team-a", "uid-1", pods=(POD,))


def _pod(namespace: str, name: str, *claims: str) -> dict[str, Any]:
    return {"metadata": {"uid": POD, "namespace": namespace, "name": name},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": c} for c in claims]}}


def _release(sim: SimEnv, pod: dict[str, Any] | None) -> tuple[Any, list[int]]:
    agent = Agent(sim.rt)
    if pod is not None:
        agent._pods[POD] = pod  # the pods watch of this node
    barrier = sim.rt.barrier
    assert barrier.run(sim.device, "startup-unknown").result == "released"
    barrier.mark_allocated(sim.device, TENANT)
    pids = sim.node.start_tenant(sim.device.name, [("obey", 1.0)], random.Random(0), pod=POD)
    return barrier.run(sim.device, "deallocated", TENANT), pids


def test_a_reserved_pod_that_does_not_use_the_claim_is_never_signalled(sim: SimEnv) -> None:
    record, pids = _release(sim, _pod("team-b", "other-0", "claim-1"))  # same claim name, another namespace
    assert record.pids_sigterm == [] and record.pids_sigkill == []
    assert record.result == "quarantined" and (record.reason or "").startswith("foreign contexts")
    assert [p["pid"] for p in record.foreign_processes] == pids
    assert any("does not reference claim(s) team-a/claim-1" in w for w in record.warnings)


def test_a_reserved_pod_naming_the_claim_is_signalled(sim: SimEnv) -> None:
    record, pids = _release(sim, _pod("team-a", "job-0", "claim-1"))
    assert record.result == "released", record.reason
    assert record.pids_sigterm == pids and record.foreign_processes == []


def test_a_pod_the_watch_no_longer_knows_is_trusted_on_its_cgroup(sim: SimEnv) -> None:
    record, pids = _release(sim, None)  # deleted: its processes linger in its cgroup on this node
    assert record.result == "released", record.reason
    assert record.pids_sigterm == pids
