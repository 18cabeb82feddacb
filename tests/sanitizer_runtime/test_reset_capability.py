"""A claim cannot force a reset the node cannot perform (review r07, D3, D7)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from dra_constructs.agent.backends.capability import reset_unavailable
from dra_constructs.agent.config import load_config
from dra_constructs.agent.kube import Tenant, allocated_devices
from dra_constructs.agent.migaccess import HOST_ROOT_ENV
from dra_constructs.agent.policy import SANITIZER_DRIVER, PreemptionPolicy
from dra_constructs.agent.runtime import build_runtime
from dra_constructs.agent.state import Phase
from dra_constructs.errors import DraConstructsError

from .conftest import SimEnv
from .fakeapi import claim
from .standin import CI, GI, GPU
from .test_standin_backends import MakeNode, a100_mig, agent_config, standin  # noqa: F401 - fixture

RESET = {"source": "FromClaim", "opaque": {"driver": SANITIZER_DRIVER, "parameters": {
    "apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy", "coldResetOnRelease": True}}}


def test_a_claim_mig_reset_needs_the_mig_config_capability(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOST_ROOT_ENV, str(tmp_path))
    assert "MIG config capability" in (reset_unavailable("mig-instance") or "")
    (tmp_path / "proc/driver/nvidia/capabilities/mig").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/capabilities/mig/config").write_text("DeviceFileMinor: 1\nDeviceFileMode: 256\n")
    assert "nvidia-cap1" in (reset_unavailable("mig-instance") or "")  # the pod lacks the device node
    (tmp_path / "dev/nvidia-caps").mkdir(parents=True)
    (tmp_path / "dev/nvidia-caps/nvidia-cap1").write_text("")
    assert reset_unavailable("mig-instance") is None
    assert "agent's own NVML session" in (reset_unavailable("gpu") or "")


def test_a_claim_reset_the_node_cannot_do_is_skipped_and_said(standin: MakeNode, tmp_path: Path,  # noqa: F811
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """r07 on the stand-in: whole GPU without nvidia-smi, MIG slice without the config capability."""
    node = standin([GPU("GPU-w", minor=0), a100_mig("GPU-m", 1, [GI(1, [CI("MIG-r0")], placement_start=0)])],
                   mig_config=False)  # the shipped pod: no MIG config capability
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d and not os.path.exists(os.path.join(d, "nvidia-smi"))))
    rt = build_runtime(agent_config(tmp_path), fsync=False)  # partition_reset: off
    for name in ("gpu-0", "gpu-1-mig-1g10gb-19-0"):
        body = claim("c", "team-a", "u-" + name, [name])
        body["status"]["allocation"]["devices"]["config"] = [RESET]
        tenant = allocated_devices([body], "node-a")[name]
        assert tenant.policy is not None and tenant.policy.cold_reset_on_release
        device = rt.device(name)
        rt.barrier.mark_allocated(device, tenant)
        record = rt.barrier.run(device, "deallocated", tenant)
        assert record.result == "released", record.reason
        assert record.reset_type is None
        assert any("cannot perform" in w for w in record.warnings), record.warnings
    assert node.layout()[0] == ["MIG-r0"]  # the slice was not destroyed


def test_the_operator_release_runs_with_the_agents_settings_not_the_tenants(tmp_path: Path) -> None:
    """D3: the tenant's policy asked for a reset (simulated: possible); the operator release does not repeat it."""
    env = SimEnv(tmp_path)
    env.rt.barrier.run(env.device, "startup-unknown")
    tenant = Tenant("t/c", "t", "u", PreemptionPolicy(cold_reset_on_release=True, grace_period_seconds=1))
    env.rt.barrier.mark_allocated(env.device, tenant)
    env.node.start_tenant(env.device.name, [("ignore-term", 0.0)], random.Random(0))
    env.faults.rates["cuda.memset_silent"] = 1.0  # the verify fails: quarantined
    record = env.rt.barrier.run(env.device, "deallocated")
    assert record.result == "quarantined" and record.reset_type == "mig-instance"
    env.faults.rates.clear()
    device = env.rt.barrier.deps.inventory[env.device.name]
    again = env.rt.barrier.operator_release(device, "reviewed", "ops")
    assert again.result == "released" and again.reset_type is None and again.policy is None
    assert env.rt.barrier.deps.store.load(env.device.name).phase is Phase.CLEAN


def test_partition_reset_gpu_is_refused_on_a_real_node(tmp_path: Path) -> None:
    """D7: the agent's own NVML session defeats nvidia-smi --gpu-reset: the option is refused, with the fix."""
    path = tmp_path / "c.yaml"
    path.write_text("node_name: n1\nbackend: nvml\npartition_reset: gpu\n")
    with pytest.raises(DraConstructsError, match="mig-instance"):
        load_config(path)
    path.write_text("node_name: n1\nbackend: simulated\npartition_reset: gpu\n")
    assert load_config(path).partition_reset.value == "gpu"
