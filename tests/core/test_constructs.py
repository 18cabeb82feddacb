"""Claim templates and workloads synthesize exactly what the renderers produce, valid per target."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest

from dra_constructs import (
    ClaimUse,
    Container,
    CustomRequest,
    DraConstructsError,
    GpuClaimTemplate,
    GpuDeployment,
    GpuJob,
    GpuModel,
    GpuPod,
    GpuRequest,
    GpuStatefulSet,
    MatchAttribute,
    MigRequest,
    PodClaim,
    PreStop,
    Target,
    render_claim_spec,
    render_pod_spec,
)

from .helpers import by_kind, new_chart, synth, validate_schema

TARGETS = ["1.32", "1.33", "1.34", "1.35"]


def every_request() -> tuple[list[Any], list[MatchAttribute]]:
    """Requests and constraints that exercise every DRA field the library can set."""
    requests = [
        MigRequest(name="mig-a", gpu=GpuModel.A100_40GB, profile="1g.5gb", count=2),
        MigRequest(name="mig-b", gpu=GpuModel.A100_40GB, profile="2g.10gb",
                   selectors=("device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('a100')",)),
        GpuRequest(name="whole", models=(GpuModel.H100_80GB,), min_memory="79Gi", architecture="Hopper",
                   min_compute_capability="9.0", count=1),
        CustomRequest(name="agent", device_class_name="mig.nvidia.com", allocation_mode="All", admin_access=True),
    ]
    constraints = [MatchAttribute(attribute="gpu.nvidia.com/parentUUID", requests=("mig-a", "mig-b"))]
    return requests, constraints


@pytest.mark.parametrize("version", TARGETS)
def test_no_dra_field_is_dropped_by_synth(version: str) -> None:
    chart = new_chart(version)
    requests, constraints = every_request()
    GpuClaimTemplate(chart, "all-fields", requests=requests, constraints=constraints, name="all-fields",
                     namespace="team-a", labels={"a": "b"}, annotations={"c": "d"}, claim_labels={"e": "f"})
    (doc,) = synth(chart)
    expected, _ = render_claim_spec(requests, constraints, Target.parse(version), "x")
    assert doc["apiVersion"] == Target.parse(version).resource_api_version
    assert doc["metadata"] == {"name": "all-fields", "namespace": "team-a", "labels": {"a": "b"},
                               "annotations": {"c": "d"}}
    assert doc["spec"] == {"metadata": {"labels": {"e": "f"}}, "spec": expected}
    validate_schema(doc, version)


@pytest.mark.parametrize("version", TARGETS)
def test_no_pod_field_is_dropped_by_synth(version: str) -> None:
    chart = new_chart(version)
    template = GpuClaimTemplate.mig(chart, "slice", gpu="H100_80GB", profile="1g.10gb")
    containers = [Container(
        name="main", image="img@sha256:" + "a" * 64, command=("python",), args=("serve.py",), env={"MODE": "x"},
        claims=(template.use("mig"), ClaimUse(claim="shared")), requests={"cpu": "1"}, limits={"memory": "1Gi"},
        ports=(8080,), working_dir="/srv", image_pull_policy="IfNotPresent",
        volume_mounts=({"name": "cache", "mountPath": "/cache"},), security_context={"runAsNonRoot": True},
    )]
    options: dict[str, Any] = {
        "claims": [PodClaim(name="shared", resource_claim_name="team-claim")],
        "termination_grace_period_seconds": 90, "pre_stop": PreStop(sleep_seconds=10),
        "restart_policy": "Always", "node_selector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "service_account_name": "runner", "extra_spec": {"volumes": [{"name": "cache", "emptyDir": {}}]},
    }
    GpuPod(chart, "pod", containers=containers, **options)
    pod = by_kind(synth(chart), "Pod")[0]
    assert pod["spec"] == render_pod_spec(containers, **options)
    assert {"name": "slice", "resourceClaimTemplateName": template.template_name} in pod["spec"]["resourceClaims"]
    validate_schema(pod, version)


@pytest.mark.parametrize("version", TARGETS)
def test_pod_template_workloads_are_schema_valid(version: str) -> None:
    chart = new_chart(version)
    gpu = GpuClaimTemplate.whole_gpus(chart, "gpu", models=["H200_141GB"], count=2)
    containers = [Container(name="c", image="img", claims=(gpu.use(),))]
    GpuDeployment(chart, "deploy", containers=containers, replicas=2)
    GpuJob(chart, "job", containers=containers, completions=2, parallelism=2)
    GpuStatefulSet(chart, "sts", containers=containers, service_name="sts")
    docs = synth(chart)
    assert sorted(d["kind"] for d in docs) == ["Deployment", "Job", "ResourceClaimTemplate", "StatefulSet"]
    for doc in docs:
        validate_schema(doc, version)
        if doc["kind"] != "ResourceClaimTemplate":
            pod = doc["spec"]["template"]["spec"]
            assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": gpu.template_name}]
            assert pod["terminationGracePeriodSeconds"] == 60
    job = by_kind(docs, "Job")[0]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    deploy = by_kind(docs, "Deployment")[0]
    assert deploy["spec"]["selector"]["matchLabels"].items() <= deploy["spec"]["template"]["metadata"]["labels"].items()


def test_per_construct_target_overrides_the_app() -> None:
    chart = new_chart("1.32")
    GpuClaimTemplate.mig(chart, "old", gpu="A30", profile="1g.6gb")
    new = GpuClaimTemplate.mig(chart, "new", gpu="A30", profile="1g.6gb", kubernetes_version="1.34")
    # The App's guardrails check against the App's target (1.32 serves no v1): an object built for
    # another cluster needs a reviewed DRA011 suppression.
    from dra_constructs.guardrails import suppress

    suppress(new, "DRA011", reason="this template is applied to the 1.34 cluster")
    versions = sorted(d["apiVersion"] for d in synth(chart))
    assert versions == ["resource.k8s.io/v1", "resource.k8s.io/v1beta1"]


def test_errors_name_the_construct_path() -> None:
    chart = new_chart("1.32", chart_id="team")
    with pytest.raises(DraConstructsError) as info:
        GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="3g.20gb")
    assert info.value.path == "team/slice"
    assert "profile" in info.value.field


def test_unknown_request_for_use_is_refused() -> None:
    template = GpuClaimTemplate.mig(new_chart(), "slice", gpu="A30", profile="1g.6gb")
    with pytest.raises(DraConstructsError, match="no request of that name"):
        template.use("gpu")


def test_bad_pod_option_is_not_silently_dropped() -> None:
    chart = new_chart()
    gpu = GpuClaimTemplate.whole_gpus(chart, "gpu", models=["A30"])
    with pytest.raises(DraConstructsError, match="not a pod option"):
        GpuDeployment(chart, "d", containers=[Container(name="c", image="i", claims=(gpu.use(),))],
                      host_network=True)


def test_invalid_claim_template_names_are_refused() -> None:
    with pytest.raises(DraConstructsError, match="DNS label"):
        GpuClaimTemplate.mig(new_chart(), "Slice_1", gpu="A30", profile="1g.6gb", claim_name="Slice_1")
    with pytest.raises(DraConstructsError, match="DNS subdomain"):
        GpuClaimTemplate.mig(new_chart(), "s", gpu="A30", profile="1g.6gb", name="UPPER")


def test_output_is_deterministic() -> None:
    def build() -> str:
        app = cdk8s.Testing.app()
        chart = cdk8s.Chart(app, "same")
        requests, constraints = every_request()
        GpuClaimTemplate(chart, "t", requests=requests, constraints=constraints)
        return app.synth_yaml()

    assert build() == build()


def test_guardrails_cover_hand_built_objects_in_the_same_app() -> None:
    chart = new_chart()
    gpu = GpuClaimTemplate.mig(chart, "slice", gpu="A30", profile="1g.6gb")
    GpuPod(chart, "ok", containers=[Container(name="c", image="i", claims=(gpu.use(),))])
    legacy = cdk8s.ApiObject(chart, "legacy", api_version="v1", kind="Pod")
    legacy.add_json_patch(cdk8s.JsonPatch.add("/spec", {"containers": [
        {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}))
    with pytest.raises(Exception, match=r"DRA00\d.*nvidia\.com/gpu"):
        chart.node.root.synth_yaml()  # type: ignore[attr-defined]


def test_workload_specific_restart_policies_and_labels() -> None:
    chart = new_chart()
    gpu = GpuClaimTemplate.whole_gpus(chart, "gpu", models=["A30"])
    containers = [Container(name="c", image="i", claims=(gpu.use(),))]
    with pytest.raises(DraConstructsError, match="does not allow it"):
        GpuJob(chart, "job", containers=containers, restart_policy="Always")
    with pytest.raises(DraConstructsError, match="does not allow it"):
        GpuDeployment(chart, "deploy", containers=containers, restart_policy="Never")
    with pytest.raises(DraConstructsError, match="label"):
        GpuPod(chart, "pod", containers=containers, labels={"team": "not ok!"})
    with pytest.raises(DraConstructsError, match="qualified name"):
        GpuClaimTemplate.mig(chart, "t", gpu="A30", profile="1g.6gb", annotations={"bad key": "v"})
