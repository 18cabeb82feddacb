"""Claim preemption policies (item 13): rendered into claims and DeviceClasses, read back by the agent."""

from __future__ import annotations

from typing import Any

import cdk8s
import kubernetes_validate
import pytest

from dra_constructs import (
    ContextsRemaining,
    DraConstructsError,
    GpuClaimTemplate,
    GpuModel,
    MigRequest,
    PreemptionPolicy,
    PreemptionPolicyDeviceClass,
    Target,
    set_kubernetes_version,
)
from dra_constructs.agent.kube import allocated_devices
from dra_constructs.agent.policy import SANITIZER_DRIVER


def new_chart(version: str) -> cdk8s.Chart:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    return cdk8s.Chart(app, "test")


def by_kind(chart: cdk8s.Chart, kind: str) -> list[dict[str, Any]]:
    return [dict(d) for d in cdk8s.Testing.synth(chart) if d["kind"] == kind]


def validate_schema(doc: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(doc, Target.parse(version).schema_version, strict=True)

POLICY = PreemptionPolicy(grace_period_seconds=10, on_contexts_remaining=ContextsRemaining.QUARANTINE,
                          cold_reset_on_release=True)
EXPECTED = {"driver": SANITIZER_DRIVER, "parameters": {
    "apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy", "gracePeriodSeconds": 10.0,
    "onContextsRemaining": "Quarantine", "coldResetOnRelease": True}}


@pytest.mark.parametrize("version", ["1.32", "1.33", "1.34", "1.35"])
def test_claim_template_renders_the_policy_as_opaque_config(version: str) -> None:
    chart = new_chart(version)
    GpuClaimTemplate(chart, "slice", requests=[
        MigRequest(name="mig", gpu=GpuModel.A100_80GB, profile="1g.10gb")], preemption_policy=POLICY)
    (doc,) = by_kind(chart, "ResourceClaimTemplate")
    validate_schema(doc, version)
    assert doc["spec"]["spec"]["devices"]["config"] == [{"opaque": EXPECTED}]


def test_the_agent_reads_the_rendered_policy_from_the_allocation() -> None:
    chart = new_chart("1.34")
    GpuClaimTemplate(chart, "slice", requests=[
        MigRequest(name="mig", gpu=GpuModel.A100_80GB, profile="1g.10gb")], preemption_policy=POLICY,
        policy_requests=["mig"])
    (doc,) = by_kind(chart, "ResourceClaimTemplate")
    config = doc["spec"]["spec"]["devices"]["config"]
    def allocated(source: str) -> dict[str, Any]:
        return {"metadata": {"name": "c", "namespace": "team-a", "uid": "u"}, "status": {"allocation": {"devices": {
            "results": [{"request": "mig", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}],
            "config": [{"source": source, **entry} for entry in config]}}}}

    assert allocated_devices([allocated("FromClass")], "node-a")["gpu-0"].policy == POLICY
    # From a claim (the tenant's) it may only tighten: Quarantine (no SIGKILL) needs the class to allow it.
    tenant = allocated_devices([allocated("FromClaim")], "node-a")["gpu-0"].policy
    assert tenant == POLICY.model_copy(update={"on_contexts_remaining": ContextsRemaining.KILL})


def test_policy_for_an_unknown_request_is_refused() -> None:
    with pytest.raises(DraConstructsError, match="policy_requests"):
        GpuClaimTemplate(new_chart("1.34"), "slice", requests=[
            MigRequest(name="mig", gpu=GpuModel.A100_80GB, profile="1g.10gb")], preemption_policy=POLICY,
            policy_requests=["gpu"])


@pytest.mark.parametrize("version", ["1.32", "1.34", "1.35"])
def test_device_class_form_for_kueue(version: str) -> None:
    chart = new_chart(version)
    PreemptionPolicyDeviceClass(chart, "cls", name="mig-quarantine", policy=POLICY, devices="mig")
    (doc,) = by_kind(chart, "DeviceClass")
    validate_schema(doc, version)
    assert doc["spec"]["config"] == [{"opaque": EXPECTED}]
    assert "mig" in doc["spec"]["selectors"][0]["cel"]["expression"]
    with pytest.raises(DraConstructsError, match="devices"):
        PreemptionPolicyDeviceClass(chart, "bad", name="x", policy=POLICY, devices="tpu")  # type: ignore[arg-type]


def test_kueue_compatible_claims_refuse_a_per_claim_policy() -> None:
    with pytest.raises(DraConstructsError, match="DeviceClass"):
        GpuClaimTemplate(new_chart("1.34"), "slice", requests=[
            MigRequest(name="mig", gpu=GpuModel.A100_80GB, profile="1g.10gb")], preemption_policy=POLICY,
            kueue_compatible=True)
