"""User mistakes: each raises DraConstructsError naming path and parameter, or gives API-valid documents."""

from __future__ import annotations

import re
from typing import Any

import cdk8s
import pytest

from dra_constructs import (
    ClaimUse,
    Container,
    DraConstructsError,
    GpuClaimTemplate,
    GpuDeployment,
    GpuJob,
    GpuPod,
    GpuStatefulSet,
    GuardrailsError,
    PodClaim,
    PreStop,
    enable_guardrails,
    set_kubernetes_version,
)

from .helpers import by_kind, new_chart, synth, validate_schema

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _gpu(chart: cdk8s.Chart, id: str = "gpu") -> GpuClaimTemplate:
    return GpuClaimTemplate.mig(chart, id, gpu="A100_40GB", profile="1g.5gb")


def _containers(gpu: GpuClaimTemplate) -> list[Container]:
    return [Container(name="c", image="img", claims=[gpu.use()])]  # a list where a tuple is asked


def _raises(call: Any, field: str, path: str = "test/") -> DraConstructsError:
    with pytest.raises(DraConstructsError) as raised:
        call()
    error = raised.value
    assert field in error.field, (error.field, str(error))
    assert error.path.startswith(path), error.path
    assert "Fix:" in str(error) and "Traceback" not in str(error)
    return error


# --- section 2: errors never escape -------------------------------------------------------------

@pytest.mark.parametrize("kwargs, field", [
    ({"containers": [{"name": "c", "image": "img"}]}, "containers[0]"),
    ({"containers": Container(name="c", image="img")}, "containers"),
    ({"claims": [{"name": "x", "resource_claim_name": "shared"}]}, "claims[0]"),
    ({"tolerations": {"key": "nvidia.com/gpu", "operator": "Exists"}}, "tolerations"),
    ({"node_selector": ["gpu=true"]}, "node_selector"),
    ({"termination_grace_period_seconds": "60"}, "termination_grace_period_seconds"),
    ({"host_network": True}, "host_network"),
    ({"tolerations": [{"key": "k", "opertor": "Exists"}]}, "tolerations[0]"),
])
def test_wrong_types_on_gpu_pod(kwargs: dict[str, Any], field: str) -> None:
    chart = new_chart()
    gpu = _gpu(chart)
    options: dict[str, Any] = {"containers": _containers(gpu), **kwargs}
    error = _raises(lambda: GpuPod(chart, "pod", **options), field, "test/pod")
    if field == "termination_grace_period_seconds":
        assert "termination_grace_period_seconds=60" in error.fix
    if "containers" in kwargs and isinstance(kwargs["containers"], Container):
        assert "wrap it in a list" in error.fix


def test_unknown_keyword_suggests_the_option() -> None:
    chart = new_chart()
    gpu = _gpu(chart)
    error = _raises(lambda: GpuPod(chart, "pod", containers=_containers(gpu), node_selectr={"a": "b"}),  # type: ignore[arg-type]
                    "node_selectr", "test/pod")
    assert "did you mean 'node_selector'" in str(error)
    error = _raises(lambda: GpuJob(chart, "job", containers=_containers(gpu), backofflimit=2),  # type: ignore[arg-type]
                    "backofflimit", "test/job")
    assert "backoff_limit" in str(error)


def test_set_kubernetes_version_after_a_chart() -> None:
    app = cdk8s.Testing.app()
    cdk8s.Chart(app, "early")
    with pytest.raises(DraConstructsError) as raised:
        set_kubernetes_version(app, "1.34")
    assert raised.value.path == "App" and raised.value.field == "set_kubernetes_version"
    assert "before creating charts" in raised.value.fix and "early" in raised.value.problem
    assert "Error:" not in str(raised.value) and raised.value.__cause__ is None


def test_synth_time_guardrail_failure_is_the_librarys_error() -> None:
    app = cdk8s.Testing.app()
    enable_guardrails(app)  # an App of only hand-built objects
    chart = cdk8s.Chart(app, "plain")
    for i in range(2):
        pod = cdk8s.ApiObject(chart, f"p{i}", api_version="v1", kind="Pod", metadata={"name": f"p{i}"})
        pod.add_json_patch(cdk8s.JsonPatch.add("/spec", {"terminationGracePeriodSeconds": 30, "containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}))
    for synth_call in (app.synth_yaml, lambda: cdk8s.Testing.synth(chart), chart.to_json):
        with pytest.raises(GuardrailsError) as raised:
            synth_call()
        assert isinstance(raised.value, DraConstructsError)
        lines = str(raised.value).splitlines()
        assert len(lines) == 2 and all(line.startswith("[DRA001] Pod/default/p") for line in lines)
        assert "[]" not in str(raised.value) and "    at " not in str(raised.value)
        assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_other_construct_errors_still_surface() -> None:
    # A validation that is not ours (cdk8s-plus Service without ports) keeps jsii's error.
    import cdk8s_plus_28 as kplus

    chart = new_chart()
    _gpu(chart)
    kplus.Service(chart, "svc")
    with pytest.raises(RuntimeError) as raised:
        synth(chart)
    assert not isinstance(raised.value, GuardrailsError)


# --- section 3: never an object the API server rejects ------------------------------------------

@pytest.mark.parametrize("version", ["1.32", "1.34"])
def test_ids_with_underscores_and_capitals_give_valid_names(version: str) -> None:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    chart = cdk8s.Chart(app, "My_Team")
    gpu = GpuClaimTemplate.mig(chart, "Big_Slice", gpu="A100_40GB", profile="1g.5gb")
    GpuPod(chart, "my_server", containers=[Container(name="c", image="i", claims=[gpu.use()])])
    GpuDeployment(chart, "Web.App", containers=[Container(name="c", image="i", claims=[gpu.use()])])
    docs = synth(chart)
    for doc in docs:
        name = doc["metadata"]["name"]
        assert DNS_LABEL.match(name) and len(name) <= 63, name
        validate_schema(doc, version)
    [pod] = by_kind(docs, "Pod")
    assert pod["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == by_kind(
        docs, "ResourceClaimTemplate")[0]["metadata"]["name"]


def test_long_workload_name_gives_a_valid_label_value() -> None:
    chart = new_chart()
    gpu = _gpu(chart)
    name = "a" * 64
    GpuDeployment(chart, "d", name=name, containers=_containers(gpu))
    [deployment] = by_kind(synth(chart), "Deployment")
    value = deployment["spec"]["selector"]["matchLabels"]["dra-constructs.io/workload"]
    assert len(value) <= 63 and LABEL_VALUE.match(value)
    assert deployment["spec"]["template"]["metadata"]["labels"]["dra-constructs.io/workload"] == value
    with pytest.raises(DraConstructsError, match="DNS label"):
        GpuJob(chart, "j", name=name, containers=_containers(gpu))  # its pods' job-name label
    with pytest.raises(DraConstructsError, match="DNS label"):
        GpuStatefulSet(chart, "s", name=name, containers=_containers(gpu))


@pytest.mark.parametrize("construct, kwargs, field", [
    (GpuDeployment, {"replicas": "2"}, "replicas"),
    (GpuDeployment, {"replicas": -1}, "replicas"),
    (GpuDeployment, {"replicas": True}, "replicas"),
    (GpuStatefulSet, {"replicas": -1}, "replicas"),
    (GpuJob, {"backoff_limit": -3}, "backoff_limit"),
    (GpuJob, {"completions": 0}, "completions"),
    (GpuJob, {"parallelism": -1}, "parallelism"),
    (GpuJob, {"ttl_seconds_after_finished": -1}, "ttl_seconds_after_finished"),
    (GpuJob, {"active_deadline_seconds": 0}, "active_deadline_seconds"),
    (GpuJob, {"completion_mode": "Indexed"}, "completion_mode"),
    (GpuJob, {"completion_mode": "indexed", "completions": 2}, "completion_mode"),
    (GpuJob, {"restart_policy": "OnFailure", "pod_failure_policy": None, "ttl_seconds_after_finished": "1"},
     "ttl_seconds_after_finished"),
    (GpuDeployment, {"strategy": "RollingUpdate"}, "strategy"),
])
def test_bad_numbers_and_modes(construct: Any, kwargs: dict[str, Any], field: str) -> None:
    chart = new_chart()
    gpu = _gpu(chart)
    _raises(lambda: construct(chart, "w", containers=_containers(gpu), **kwargs), field, "test/w")


@pytest.mark.parametrize("kwargs, field, text", [
    ({"extra_spec": {"volumez": []}}, "extra_spec['volumez']", "did you mean 'volumes'"),
    ({"extra_spec": {"volumeClaimTemplates": []}}, "extra_spec['volumeClaimTemplates']", "StatefulSet"),
    ({"extra_spec": {"hostPID": "yes"}}, "extra_spec['hostPID']", "boolean"),
    ({"extra_spec": {"tolerations": []}, "tolerations": [{"key": "k", "operator": "Exists"}]}, "extra_spec",
     "tolerations="),
    ({"extra_spec": {"hostnameOverride": "x"}}, "extra_spec['hostnameOverride']", "Kubernetes 1.32"),
    ({"containers_extra": {"readinesProbe": {}}}, "extra['readinesProbe']", "did you mean 'readinessProbe'"),
    ({"mounts": [{"name": "cache", "mountPath": "/c"}]}, "volumeMounts", "names no volume"),
    ({"mounts": [{"name": "cach", "mountPath": "/c"}], "volumes": [{"name": "cache", "emptyDir": {}}]},
     "volumeMounts", "did you mean 'cache'"),
    ({"mounts": [{"mountPath": "/c"}]}, "volume_mounts[0]", "needs 'name'"),
])
def test_extra_fields_are_checked(kwargs: dict[str, Any], field: str, text: str) -> None:
    chart = new_chart()
    gpu = _gpu(chart)
    extra = kwargs.pop("containers_extra", {})
    mounts = kwargs.pop("mounts", ())
    containers = [Container(name="c", image="img", claims=[gpu.use()], extra=extra, volume_mounts=mounts)]
    error = _raises(lambda: GpuPod(chart, "pod", containers=containers, **kwargs), field, "test/pod")
    assert text in str(error)


def test_extra_fields_that_exist_pass_and_validate() -> None:
    chart = new_chart("1.34")
    gpu = _gpu(chart)
    containers = [Container(name="c", image="img", claims=[gpu.use()], volume_mounts=[
        {"name": "shm", "mountPath": "/dev/shm"}], extra={"readinessProbe": {"httpGet": {"path": "/", "port": 80}}})]
    GpuPod(chart, "pod", containers=containers, volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}],
           extra_spec={"hostnameOverride": "gpu-pod", "runtimeClassName": "nvidia"})
    for doc in synth(chart):
        validate_schema(doc, "1.34")


def test_guardrails_for_an_app_of_hand_built_objects_only() -> None:
    app = cdk8s.Testing.app()
    chart = cdk8s.Chart(app, "plain")
    pod = cdk8s.ApiObject(chart, "p", api_version="v1", kind="Pod", metadata={"name": "p"})
    pod.add_json_patch(cdk8s.JsonPatch.add("/spec", {"terminationGracePeriodSeconds": 30, "containers": [
        {"name": "c", "image": "i", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}))
    assert app.synth_yaml()  # without the one line, nothing checks it
    enable_guardrails(app)
    with pytest.raises(GuardrailsError, match=r"\[DRA002\] Pod/default/p"):
        app.synth_yaml()


def test_pod_claims_as_dicts_and_claim_uses_as_dicts() -> None:
    chart = new_chart()
    # Container coerces a dict into a ClaimUse (pydantic); a pod claim must be a PodClaim.
    container = Container(name="c", image="i", claims=[{"claim": "shared"}])  # type: ignore[list-item]
    assert container.claims == (ClaimUse(claim="shared"),)
    GpuPod(chart, "ok", containers=[container], claims=[PodClaim(name="shared", resource_claim_name="team")])
    _raises(lambda: GpuPod(chart, "bad", containers=[container],
                           claims=[{"name": "shared", "resource_claim_name": "team"}]),  # type: ignore[list-item]
            "claims[0]", "test/bad")


# --- section 4: messages that point at the fix ---------------------------------------------------

@pytest.mark.parametrize("call, text", [
    (lambda: Container(name="c", imag="x"), "imag='x'"),  # type: ignore[call-arg]
    (lambda: Container(name="c", image="i", claims=[{"claim": "x", "requets": "y"}]), "did you mean 'request'"),
    (lambda: GpuClaimTemplate.whole_gpus(new_chart(), "g", models=["H100-80GB"]), "did you mean 'H100_80GB'"),
])
def test_misspellings_get_a_did_you_mean(call: Any, text: str) -> None:
    with pytest.raises(DraConstructsError) as raised:
        call()
    assert text in str(raised.value) and "did you mean" in str(raised.value)
    assert str(raised.value).count("Fix:") == 1


def test_architecture_alone_says_what_it_needs() -> None:
    with pytest.raises(DraConstructsError) as raised:
        GpuClaimTemplate.whole_gpus(new_chart(), "g", architecture="Hopper")
    assert raised.value.field == "requests['gpu'].architecture"
    assert "min_memory" in raised.value.fix and "models" in raised.value.fix


def test_misspelt_nvidia_attribute_in_a_selector() -> None:
    with pytest.raises(DraConstructsError) as raised:
        GpuClaimTemplate.whole_gpus(new_chart(), "g", models=["H100_80GB"],
                                    selectors=["device.attributes['gpu.nvidia.com'].archtecture == 'Hopper'"])
    assert "did you mean 'architecture'" in raised.value.fix


def test_another_validation_failing_is_reported_not_swallowed() -> None:
    import constructs
    import jsii

    @jsii.implements(constructs.IValidation)
    class Other:
        def validate(self) -> list[str]:
            return ["other problem"]

    app = cdk8s.Testing.app()
    enable_guardrails(app)
    chart = cdk8s.Chart(app, "c")
    pod = cdk8s.ApiObject(chart, "p", api_version="v1", kind="Pod", metadata={"name": "p"})
    pod.add_json_patch(cdk8s.JsonPatch.add("/spec", {"terminationGracePeriodSeconds": 30, "containers": [
        {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}))
    pod.node.add_validation(Other())
    with pytest.raises(RuntimeError, match="other problem"):
        app.synth_yaml()


def test_construct_arguments_and_duplicate_ids() -> None:
    chart = new_chart()
    gpu = _gpu(chart)
    with pytest.raises(DraConstructsError, match="must be a construct"):
        GpuPod(None, "p", containers=_containers(gpu))  # type: ignore[arg-type]
    with pytest.raises(DraConstructsError, match="non-empty string"):
        GpuPod(chart, 5, containers=_containers(gpu))  # type: ignore[arg-type]
    error = _raises(lambda: GpuPod(chart, "gpu", containers=_containers(gpu)), "id", "test/gpu")
    assert "already has this id" in error.problem
    error = _raises(lambda: _gpu(chart), "id", "test/gpu")
    with pytest.raises(DraConstructsError, match="must be >= 0"):
        GpuPod(chart, "p", containers=_containers(gpu), pre_stop=PreStop(sleep_seconds=-1))


def test_inventory_file_on_a_claim_template(tmp_path: Any) -> None:
    chart = new_chart()
    with pytest.raises(DraConstructsError, match="cannot read the file"):
        GpuClaimTemplate.mig(chart, "g", gpu="A100_40GB", profile="1g.5gb", inventory=str(tmp_path / "none.yaml"))
