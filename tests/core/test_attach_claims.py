"""attach_claims: DRA claims on every cdk8s-plus-28 workload kind, schema-valid and guardrail-checked."""

from __future__ import annotations

from typing import Any

import cdk8s
import cdk8s_plus_28 as kplus
import pytest

from dra_constructs import (
    ClaimUse,
    DraConstructsError,
    GpuClaimTemplate,
    GuardrailsError,
    PodClaim,
    attach_claims,
    suppress,
)
from dra_constructs.guardrails import validate_app

from .helpers import new_chart, synth, validate_schema

POD_SPEC = {"Pod": ("spec",), "CronJob": ("spec", "jobTemplate", "spec", "template", "spec")}


def _pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec: Any = doc
    for key in POD_SPEC.get(doc["kind"], ("spec", "template", "spec")):
        spec = spec[key]
    return dict(spec)


def _workload(chart: cdk8s.Chart, kind: str) -> Any:
    containers = [kplus.ContainerProps(name="main", image="img")]
    if kind == "CronJob":
        return kplus.CronJob(chart, "w", schedule=cdk8s.Cron.daily(), containers=containers)
    if kind == "StatefulSet":
        service = kplus.Service(chart, "svc", ports=[kplus.ServicePort(port=80)])
        return kplus.StatefulSet(chart, "w", service=service, containers=containers)
    return getattr(kplus, kind)(chart, "w", containers=containers)


@pytest.mark.parametrize("version", ["1.32", "1.34"])
@pytest.mark.parametrize("kind", ["Pod", "Deployment", "StatefulSet", "Job", "CronJob", "DaemonSet"])
def test_every_workload_kind_carries_the_claims(kind: str, version: str) -> None:
    chart = new_chart(version)
    gpu = GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="3g.40gb")
    workload = _workload(chart, kind)
    attach_claims(workload, {"main": gpu})  # the template itself is shorthand for gpu.use()
    docs = synth(chart)
    [doc] = [d for d in docs if d["kind"] == kind]
    spec = _pod_spec(doc)
    assert spec["resourceClaims"] == [{"name": "slice", "resourceClaimTemplateName": gpu.template_name}]
    assert spec["containers"][0]["resources"]["claims"] == [{"name": "slice"}]
    assert spec["containers"][0]["securityContext"]["runAsNonRoot"] is True  # cdk8s-plus's rendering kept
    assert doc["metadata"]["name"] == workload.name
    for d in docs:
        validate_schema(d, version)
    assert [f for f in validate_app(chart) if f.severity.value == "error"] == []


def test_requests_later_changes_metadata_patches_and_suppressions() -> None:
    chart = new_chart("1.34")
    gpu = GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="3g.40gb")
    shared = PodClaim(name="shared", resource_claim_name="team-claim")
    deployment = kplus.Deployment(chart, "d", containers=[kplus.ContainerProps(name="a", image="img"),
                                                         kplus.ContainerProps(name="b", image="img")])
    carrier = attach_claims(deployment, {"a": [gpu.use("mig")]})
    attach_claims(deployment, {"b": [ClaimUse(claim="shared")]}, pod_claims=[shared])
    assert cdk8s.ApiObject.of(deployment) is carrier
    deployment.scheduling.tolerate(kplus.Node.tainted(kplus.NodeTaintQuery.exists("nvidia.com/gpu")))  # after
    deployment.metadata.add_label("team", "a")
    carrier.metadata.add_annotation("owner", "ml")
    carrier.add_json_patch(cdk8s.JsonPatch.add("/spec/template/spec/priorityClassName", "gpu-high"))
    suppress(deployment, "DRA006", reason="reviewed: single tenant")
    [doc] = [d for d in synth(chart) if d["kind"] == "Deployment"]
    spec = _pod_spec(doc)
    assert [c["name"] for c in spec["resourceClaims"]] == ["shared", "slice"]
    assert spec["containers"][0]["resources"]["claims"] == [{"name": "slice", "request": "mig"}]
    assert spec["containers"][1]["resources"]["claims"] == [{"name": "shared"}]
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    assert spec["priorityClassName"] == "gpu-high"  # a patch no 1.28 schema filters
    assert doc["metadata"]["labels"]["team"] == "a" and doc["metadata"]["annotations"]["owner"] == "ml"
    assert "DRA006" in doc["metadata"]["annotations"]["guardrails.dra-constructs.io/suppressions"]
    validate_schema(doc, "1.34")


def test_attach_claims_mistakes() -> None:
    chart = new_chart()
    gpu = GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="3g.40gb")
    pod = kplus.Pod(chart, "p", containers=[kplus.ContainerProps(name="main", image="img")])
    cases: list[tuple[Any, Any, str]] = [
        (pod, {"mian": [gpu.use()]}, "claims"),
        (pod, {"main": [{"claim": "slice"}]}, "claims['main'][0]"),
        (pod, {"main": "slice"}, "claims['main']"),
        (pod, [gpu.use()], "claims"),
        (kplus.ConfigMap(chart, "cm"), {"main": [gpu.use()]}, "workload"),
        (pod, {"main": [ClaimUse(claim="nope")]}, "containers['main'].claims"),
        (kplus.Pod(chart, "my_pod", containers=[kplus.ContainerProps(name="main", image="i")]), {"main": [gpu]},
         "metadata.name"),
    ]
    for workload, claims, field in cases:
        with pytest.raises(DraConstructsError) as raised:
            attach_claims(workload, claims)
        assert raised.value.field == field, str(raised.value)
        assert raised.value.path.startswith("test/")


def test_dropped_fields_message_points_to_attach_claims() -> None:
    chart = new_chart()
    GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="3g.40gb")
    deployment = kplus.Deployment(chart, "d", containers=[kplus.ContainerProps(name="main", image="img")])
    cdk8s.ApiObject.of(deployment).add_json_patch(cdk8s.JsonPatch.add(
        "/spec/template/spec/resourceClaims", [{"name": "gpu", "resourceClaimTemplateName": "t"}]))
    with pytest.raises(GuardrailsError) as raised:
        synth(chart)
    lines = [line for line in str(raised.value).splitlines() if "DRA005" in line]
    assert lines and all("cdk8s-plus-28 dropped" in line and "attach_claims(" in line for line in lines)
