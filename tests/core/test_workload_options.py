"""GPU-first workload options: strategy, Job failure policy, Indexed, TTL, claim templates, annotations."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest

from dra_constructs import (
    Container,
    DraConstructsError,
    GpuClaimTemplate,
    GpuDeployment,
    GpuJob,
    GpuStatefulSet,
    PodFailurePolicy,
    RollingUpdate,
    VolumeClaimTemplate,
)
from dra_constructs._api_fields import CONTAINER_FIELDS, POD_SPEC_FIELDS, fields_for

from .helpers import by_kind, new_chart, synth, validate_schema


@pytest.mark.parametrize("version", ["1.32", "1.34"])
def test_gpu_defaults_and_typed_options_are_schema_valid(version: str) -> None:
    chart = new_chart(version)
    gpu = GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="1g.10gb")
    containers = [Container(name="c", image="img", claims=[gpu.use()],
                            volume_mounts=[{"name": "data", "mountPath": "/data"}])]
    GpuDeployment(chart, "serve", containers=[Container(name="c", image="img", claims=[gpu.use()])],
                  priority_class_name="gpu-serving", pod_annotations={"prometheus.io/scrape": "true"})
    GpuDeployment(chart, "recreate", strategy="Recreate", containers=[Container(name="c", image="i",
                                                                                claims=[gpu.use()])])
    GpuJob(chart, "train", containers=[Container(name="c", image="img", claims=[gpu.use()])], completions=4,
           parallelism=4, completion_mode="Indexed", ttl_seconds_after_finished=600, active_deadline_seconds=86400,
           pod_failure_policy=PodFailurePolicy(fail_job_on_exit_codes=[42], container_name="c"))
    GpuJob(chart, "retry", containers=[Container(name="c", image="img", claims=[gpu.use()])],
           restart_policy="OnFailure")
    GpuStatefulSet(chart, "db", containers=containers, service_name="db",
                   volume_claim_templates=[VolumeClaimTemplate(name="data", storage="100Gi")])
    docs = synth(chart)
    for doc in docs:
        validate_schema(doc, version)
    serve, recreate = by_kind(docs, "Deployment")
    assert serve["spec"]["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert recreate["spec"]["strategy"] == {"type": "Recreate"}
    assert serve["spec"]["template"]["spec"]["priorityClassName"] == "gpu-serving"
    assert serve["spec"]["template"]["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    train, retry = by_kind(docs, "Job")
    assert train["spec"]["completionMode"] == "Indexed" and train["spec"]["ttlSecondsAfterFinished"] == 600
    assert train["spec"]["activeDeadlineSeconds"] == 86400
    assert train["spec"]["podFailurePolicy"]["rules"] == [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42], "containerName": "c"}},
    ]
    assert "podFailurePolicy" not in retry["spec"]  # OnFailure pods cannot have one
    [db] = by_kind(docs, "StatefulSet")
    assert db["spec"]["volumeClaimTemplates"][0]["spec"]["resources"] == {"requests": {"storage": "100Gi"}}


def test_option_mistakes() -> None:
    chart = new_chart()
    gpu = GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="1g.10gb")
    containers = [Container(name="c", image="img", claims=[gpu.use()])]
    with pytest.raises(DraConstructsError, match="both 0"):
        GpuDeployment(chart, "a", containers=containers, strategy=RollingUpdate(max_surge=0, max_unavailable=0))
    with pytest.raises(DraConstructsError, match="percentage"):
        GpuDeployment(chart, "b", containers=containers, strategy=RollingUpdate(max_surge="lots"))
    with pytest.raises(DraConstructsError, match="restartPolicy Never"):
        GpuJob(chart, "c", containers=containers, restart_policy="OnFailure", pod_failure_policy=PodFailurePolicy())
    with pytest.raises(DraConstructsError, match="non-zero"):
        GpuJob(chart, "d", containers=containers, pod_failure_policy=PodFailurePolicy(fail_job_on_exit_codes=[0]))
    with pytest.raises(DraConstructsError, match="names no volume"):  # a claim template of another set
        GpuStatefulSet(chart, "e", containers=[Container(name="c", image="i", claims=[gpu.use()],
                                                         volume_mounts=[{"name": "data", "mountPath": "/d"}])])
    with pytest.raises(DraConstructsError, match="quantity"):
        GpuStatefulSet(chart, "f", containers=containers,
                       volume_claim_templates=[VolumeClaimTemplate(name="data", storage="lots")])


def _schema_fields(definition: str, minor: int) -> dict[str, str]:
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v1.{minor}.0-local"
    properties = json.loads((root / "_definitions.json").read_text())["$defs"][definition]["properties"]
    out = {}
    for name, prop in properties.items():
        kind = prop.get("type", "object")
        out[name] = next(k for k in kind if k != "null") if isinstance(kind, list) else kind
    return out


@pytest.mark.parametrize("minor", range(32, 38))
def test_field_table_matches_the_official_schema(minor: int) -> None:
    assert fields_for(POD_SPEC_FIELDS, minor) == _schema_fields("io.k8s.api.core.v1.PodSpec", minor)
    assert fields_for(CONTAINER_FIELDS, minor) == _schema_fields("io.k8s.api.core.v1.Container", minor)


def test_rendering_builds_the_construct_path_only_for_errors() -> None:
    # The path is a jsii round trip per object: a valid pod must never build it (docs/performance.md).
    from dra_constructs import ClaimUse, PodClaim, Target, render_pod_spec

    calls: list[int] = []

    def where() -> str:
        calls.append(1)
        return "test/pod"

    render_pod_spec([Container(name="c", image="i", claims=[ClaimUse(claim="x")], extra={"tty": True})],
                    claims=[PodClaim(name="x", resource_claim_name="shared")], kubernetes_version=Target.parse("1.34"),
                    extra_spec={"hostPID": False}, tolerations=[{"operator": "Exists"}], where=where)
    assert calls == []
