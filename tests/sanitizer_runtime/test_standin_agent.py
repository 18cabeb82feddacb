"""The agent and barrier with the real backends against the stand-in driver: items 1, 3, 9, 12.

Same harness as ``test_standin_backends.py`` (real pynvml, cuda-bindings, NVRTC, the CUDA
worker; tenants are real child processes), plus the local API server of ``fakeapi``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dra_constructs.agent.agent import Agent
from dra_constructs.agent.backends.simulated import SimulatedCrash
from dra_constructs.agent.clock import VirtualClock
from dra_constructs.agent.config import KubeSettings
from dra_constructs.agent.kube import Tenant as ClaimTenant
from dra_constructs.agent.runtime import Runtime, build_runtime
from dra_constructs.agent.state import Phase

from .fakeapi import FakeApi, claim
from .standin import CI, GI, GPU, NVML_ERROR_NO_PERMISSION, MiB, Tenant
from .test_standin_backends import MakeNode, a100_mig, agent_config, standin  # noqa: F401 - fixture

CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"


def _with_api(api: FakeApi, tmp_path: Path, **fields: Any) -> Runtime:
    config = agent_config(tmp_path, **fields).model_copy(update={"kube": KubeSettings(
        mode="url", url=api.url, kubernetes_version="1.34", retries=0, retry_backoff_s=0.01, request_timeout_s=0.5,
        watch_timeout_s=1)})
    return build_runtime(config, fsync=False)


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "evidence.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_claim_on_a_slice_nvml_could_not_read_is_guarded(standin: MakeNode, fake_api: FakeApi,  # noqa: F811
                                                         tmp_path: Path) -> None:
    """Item 1: a MIG slice dropped by NO_PERMISSION is not skipped: alert and guard, also after release."""
    gis = [GI(1, [CI("MIG-m1")], placement_start=0),
           GI(2, [CI("MIG-m2")], placement_start=1, error=NVML_ERROR_NO_PERMISSION,
              error_call="nvmlDeviceGetMigDeviceHandleByIndex")]
    standin([a100_mig("GPU-m", 0, gis)])
    rt = _with_api(fake_api, tmp_path)
    hidden = "gpu-0-mig-1g10gb-19-1"
    assert [d.name for d in rt.devices] == ["gpu-0-mig-1g10gb-19-0"]
    fake_api.claims = [claim("c1", "team-a", "u1", [hidden], reserved=["p1"])]
    agent = Agent(rt, clock=VirtualClock())
    assert agent.initial_list()
    agent.startup()
    agent.wait()
    assert fake_api.rules[f"dra-sanitizer-node-a-{hidden}"]["spec"]["taint"]["value"] == "unmapped"
    event = next(e for e in fake_api.events if e["reason"] == "UnmappedDevice")
    assert "team-a/c1" in event["message"] and "Insufficient Permissions" in event["message"]
    assert b'dra_sanitizer_unmapped_claim_devices{device="gpu-0-mig-1g10gb-19-1"} 1.0' in rt.metrics.render()
    agent._claims = {}
    agent.reconcile()  # released while still unreadable: the guard stays (nothing proved it clean)
    agent.wait()
    assert fake_api.rules[f"dra-sanitizer-node-a-{hidden}"]["spec"]["taint"]["value"] == "unmapped"
    # (Mapping it once NVML can read it again is test_agent.py's scenario: the stand-in reads its
    # configuration once per process, like a driver whose state does not change under a test.)


def test_api_down_at_start_does_not_kill_a_real_tenant(standin: MakeNode, fake_api: FakeApi,  # noqa: F811
                                                       tmp_path: Path) -> None:
    """Item 3: the previous agent left the GPU allocated; the API is down when the agent restarts."""
    node = standin([GPU("GPU-a", total=64 * MiB)])
    first = _with_api(fake_api, tmp_path)
    device = first.devices[0]
    first.barrier.run(device, "startup-unknown")
    first.barrier.mark_allocated(device, ClaimTenant("team-a/c1", "team-a", "u1"))
    tenant = Tenant(node, "GPU-a", nbytes=8 * MiB, ignore_term=True)
    try:
        fake_api.fail("GET", CLAIMS, 503)
        rt = _with_api(fake_api, tmp_path)
        agent = Agent(rt, clock=VirtualClock())
        assert not agent.initial_list()
        agent.startup()
        agent.wait()
        assert tenant.alive() and rt.barrier.deps.store.load(device.name).phase is Phase.ALLOCATED
        assert not [r for r in _records(tmp_path) if r["trigger"] != "startup-unknown"]
        # The API answers again and the claim is gone: now the barrier runs and drains the tenant.
        fake_api.claims = []
        agent._claims = {}
        agent.reconcile()
        agent.wait()
        assert not tenant.alive()
    finally:
        tenant.stop()
    last = _records(tmp_path)[-1]
    assert last["trigger"] == "deallocated-while-down" and last["result"] == "released", last["reason"]
    assert tenant.pid in last["pids_sigkill"]


def test_release_finished_after_a_crash_carries_the_verify_figures(standin: MakeNode,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    """Item 9: the agent dies between verify and release; the recovery-release record is the proof."""
    node = standin([GPU("GPU-a", total=64 * MiB)], residue_byte=0xAB)

    def crash(_device: str, point: str) -> None:
        if point == "releasing":
            raise SimulatedCrash(point)

    config = agent_config(tmp_path)
    rt = build_runtime(config, crash_hook=crash, fsync=False)
    with pytest.raises(SimulatedCrash):
        rt.barrier.run(rt.devices[0], "deallocated")
    assert rt.barrier.deps.store.load("gpu-0").phase is Phase.RELEASING
    record = build_runtime(config, fsync=False).barrier.recover(rt.devices[0])
    assert record is not None and record.trigger == "recovery-release" and record.result == "released"
    assert record.bytes_verified > 0 and record.coverage_of_free >= 0.99 and record.nonzero_words == 0
    assert record.control_found == record.control_planted == 2 and record.bytes_not_covered is not None
    assert node.compute_mode("GPU-a") == 0


def test_mig_instance_reset_on_a_driver_that_cannot_fails_closed(standin: MakeNode, fake_api: FakeApi,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    """Item 12 with the real NVML backend: a reset the driver refuses quarantines, never releases.

    (The stand-in implements the reset calls; ``test_standin_partitions.py`` runs them. Here the
    driver answers NOT_SUPPORTED to the first of them, as one without MIG management would.)
    """
    standin([a100_mig("GPU-m", 0, [GI(1, [CI("MIG-m1")], placement_start=0)], error=3,
                      error_call="nvmlDeviceGetGpuInstances")])
    rt = _with_api(fake_api, tmp_path, partition_reset="mig-instance")
    device = rt.devices[0]
    rt.barrier.run(device, "startup-unknown")
    rt.barrier.mark_allocated(device, ClaimTenant("team-a/c1", "team-a", "u1"))
    record = rt.barrier.run(device, "deallocated", ClaimTenant("team-a/c1", "team-a", "u1"))
    assert record.result == "quarantined" and record.reset_type is None
    assert record.reason is not None and "nvmlDeviceGetGpuInstances" in record.reason
    assert fake_api.rules[f"dra-sanitizer-node-a-{device.name}"]["spec"]["taint"]["value"] == "quarantined"
    assert rt.barrier.deps.store.load(device.name).phase is Phase.QUARANTINED


def test_api_down_at_first_start_prohibits_new_contexts_on_never_sanitized_gpus(
        standin: MakeNode, fake_api: FakeApi, tmp_path: Path) -> None:  # noqa: F811
    """Item 3's gap: no saved state and no claims: NVML compute mode PROHIBITED, the running tenant lives."""
    node = standin([GPU("GPU-a", minor=0, total=64 * MiB), GPU("GPU-b", minor=1, total=64 * MiB)], residue_byte=0xAB)
    tenant = Tenant(node, "GPU-b", nbytes=8 * MiB)  # holds gpu-1 under a claim the agent cannot see yet
    try:
        fake_api.fail("GET", CLAIMS, 503)
        rt = _with_api(fake_api, tmp_path)
        agent = Agent(rt, clock=VirtualClock())
        assert not agent.initial_list()
        agent.startup()
        agent.wait()
        assert node.compute_mode("GPU-a") == node.compute_mode("GPU-b") == 2  # NVML_COMPUTEMODE_PROHIBITED
        assert tenant.alive() and _records(tmp_path) == []
        with pytest.raises(RuntimeError, match="did not start"):  # the stand-in libcuda refuses a new context
            Tenant(node, "GPU-a", nbytes=MiB)
        # The API answers: gpu-1 is held by a live claim, gpu-0 is free.
        fake_api.claims = [claim("c1", "team-a", "u1", ["gpu-1"], reserved=["p1"])]
        agent._claims = {"u1": fake_api.claims[0]}
        agent.reconcile()
        agent.wait()
        assert tenant.alive()
        assert node.compute_mode("GPU-a") == 0 and node.compute_mode("GPU-b") == 0
        assert rt.barrier.deps.store.load("gpu-1").phase is Phase.ALLOCATED
        assert fake_api.rules["dra-sanitizer-node-a-gpu-1"]["spec"]["taint"]["value"] == "in-use"
    finally:
        tenant.stop()
    records = _records(tmp_path)
    assert [(r["device"], r["trigger"], r["result"]) for r in records] == [("gpu-0", "startup-unknown", "released")]
    assert records[0]["nonzero_words"] == 0 and records[0]["coverage_of_free"] >= 0.99
