"""GpuTenant / TenantPlatform: objects, schemas (Kubernetes and Kueue CRDs), errors, admission policies."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest
from core.helpers import validate_any_schema
from core.kueue_schema import validate_kueue
from guardrails.vap import evaluate

from dra_constructs import (
    DraConstructsError,
    FirstAvailable,
    GpuClaimTemplate,
    GpuModel,
    MatchAttribute,
    MigRequest,
    Target,
    set_kubernetes_version,
)
from dra_constructs.tenants import GpuTenant, KueueQueue, Mig, TenantPlatform, WholeGpu, set_kueue_compatible
from dra_constructs.tenants.kueue import kueue_inadmissible

H100_SLICE = Mig(GpuModel.H100_80GB, "1g.10gb")


def _app(version: str) -> cdk8s.App:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    return app


def _docs(app: cdk8s.App) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for chart in app.charts:
        docs.extend(dict(d) for d in cdk8s.Testing.synth(chart))
    return docs


def _of(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.parametrize("version", ["1.34", "1.36"])
def test_tenant_objects_validate_and_carry_the_quota(version: str) -> None:
    app = _app(version)
    chart = cdk8s.Chart(app, "platform")
    tenant = GpuTenant(chart, "team-a", quotas={H100_SLICE: 7, WholeGpu(GpuModel.H100_80GB): 2},
                       kueue=KueueQueue(borrowing_limit=1, other_quotas={"cpu": "8"}))
    apps = cdk8s.Chart(app, "apps", namespace=tenant.namespace)
    tenant.claim_template(apps, "slice", H100_SLICE, count=2)
    docs = _docs(app)
    for doc in docs:
        validate_any_schema(doc, version)
    [ns] = _of(docs, "Namespace")
    assert ns["metadata"]["labels"]["dra-constructs.io/tenant"] == "team-a"
    assert not any("admin-access" in k for k in ns["metadata"]["labels"])
    [quota] = _of(docs, "ResourceQuota")
    hard = quota["spec"]["hard"]
    assert hard["h100-80gb-1g.10gb.mig.dra-constructs.io.deviceclass.resource.k8s.io/devices"] == "8"  # 7 + borrow 1
    assert hard["mig.nvidia.com.deviceclass.resource.k8s.io/devices"] == "0"
    assert ("requests.nvidia.com/gpu" in hard) is (version == "1.36")
    classes = {d["metadata"]["name"] for d in _of(docs, "DeviceClass")}
    assert classes == {"h100-80gb-1g.10gb.mig.dra-constructs.io", "h100-80gb.gpu.dra-constructs.io"}
    [cq] = _of(docs, "ClusterQueue")
    gpu_group = cq["spec"]["resourceGroups"][0]
    assert gpu_group["flavors"][0]["resources"][0] == {
        "name": "dra-constructs.io/h100-80gb-mig-1g.10gb", "nominalQuota": 7, "borrowingLimit": 1}
    assert cq["spec"]["cohortName"] == "gpu-tenants"
    [lq] = _of(docs, "LocalQueue")
    assert lq["metadata"]["namespace"] == "team-a" and lq["spec"]["clusterQueue"] == cq["metadata"]["name"]
    bindings = _of(docs, "ValidatingAdmissionPolicyBinding")
    # pods, workloads, cronjobs, claims, namespaces (DRA019: the tenant may not label its Namespace), device classes
    assert len(bindings) == 6 and all(b["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]}] for b in bindings)
    [template] = _of(docs, "ResourceClaimTemplate")
    assert template["metadata"]["namespace"] == "team-a"
    assert list(kueue_inadmissible(template["spec"]["spec"])) == []
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == \
        "h100-80gb-1g.10gb.mig.dra-constructs.io"
    assert tenant.queue_labels == {"kueue.x-k8s.io/queue-name": "gpu"}


def test_the_kueue_configuration_snippet_maps_every_tenant_class() -> None:
    app = _app("1.34")
    chart = cdk8s.Chart(app, "platform")
    platform = TenantPlatform(chart, "shared")
    GpuTenant(chart, "a", quotas={H100_SLICE: 1}, kueue=KueueQueue(), platform=platform)
    GpuTenant(chart, "b", quotas={Mig(GpuModel.H100_80GB, "3g.40gb"): 1, H100_SLICE: 2}, kueue=KueueQueue())
    mappings = platform.kueue_configuration()["resources"]["deviceClassMappings"]
    assert [m["deviceClassNames"] for m in mappings] == [["h100-80gb-1g.10gb.mig.dra-constructs.io"],
                                                          ["h100-80gb-3g.40gb.mig.dra-constructs.io"]]
    docs = _docs(app)
    [config_map] = _of(docs, "ConfigMap")
    assert "h100-80gb-3g.40gb.mig.dra-constructs.io" in config_map["data"]["deviceClassMappings.yaml"]
    assert len(_of(docs, "DeviceClass")) == 2 and len(_of(docs, "ResourceFlavor")) == 1


@pytest.mark.parametrize(("kwargs", "field", "problem"), [
    ({"labels": {"resource.kubernetes.io/admin-access": "true"}}, "labels", "never allows admin-access"),
    ({"quotas": {Mig(GpuModel.H100_80GB, "9g.99gb"): 1}}, "profile", "no MIG profile"),
    ({"quotas": {"example.com/fpga": 1}}, "quotas", "not a DeviceClass the catalog knows"),
    ({"kueue": KueueQueue(borrowing_limit=-1)}, "kueue.borrowing_limit", "whole number"),
    ({"kueue": KueueQueue(cohort=None, borrowing_limit=2)}, "kueue.borrowing_limit", "cohort"),
    ({"namespace": "Team_A"}, "namespace", "DNS label"),
])
def test_bad_input_is_a_clear_error(kwargs: dict[str, Any], field: str, problem: str) -> None:
    chart = cdk8s.Chart(_app("1.34"), "platform")
    with pytest.raises(DraConstructsError) as raised:
        GpuTenant(chart, "team-a", **{"quotas": {H100_SLICE: 1}, **kwargs})
    assert field in raised.value.field and problem in str(raised.value)


def test_kueue_needs_1_34_and_charts_without_namespace_and_one_tenant_per_namespace() -> None:
    with pytest.raises(DraConstructsError, match=r"1\.34"):
        GpuTenant(cdk8s.Chart(_app("1.32"), "p"), "t", quotas={H100_SLICE: 1}, kueue=KueueQueue())
    with pytest.raises(DraConstructsError, match="chart has a namespace"):
        GpuTenant(cdk8s.Chart(_app("1.34"), "p", namespace="x"), "t", quotas={H100_SLICE: 1})
    chart = cdk8s.Chart(_app("1.34"), "p")
    tenant = GpuTenant(chart, "t", quotas={H100_SLICE: 1})
    with pytest.raises(DraConstructsError, match="another GpuTenant"):
        GpuTenant(chart, "t2", namespace="t", quotas={H100_SLICE: 1})
    with pytest.raises(DraConstructsError, match="no quota for it"):
        tenant.device_class(Mig(GpuModel.H100_80GB, "3g.40gb"))


def test_kueue_compatible_claims_refuse_what_kueue_cannot_admit() -> None:
    app = _app("1.34")
    chart = cdk8s.Chart(app, "c", namespace="q")
    slice_ = MigRequest(name="a", gpu=GpuModel.H100_80GB, profile="1g.10gb")
    GpuClaimTemplate(chart, "ok", requests=[slice_], kueue_compatible=True)
    with pytest.raises(DraConstructsError, match="constraints"):
        GpuClaimTemplate(chart, "c1", requests=[slice_, MigRequest(name="b", gpu="H100_80GB", profile="1g.10gb")],
                         constraints=[MatchAttribute(attribute="gpu.nvidia.com/parentUUID")], kueue_compatible=True)
    app = _app("1.34")
    set_kueue_compatible(app)  # before the first chart (cdk8s context)
    chart = cdk8s.Chart(app, "c", namespace="q")
    with pytest.raises(DraConstructsError, match="firstAvailable"):
        GpuClaimTemplate(chart, "c2", requests=[FirstAvailable(name="f", alternatives=(slice_,))])
    GpuClaimTemplate(chart, "c3", requests=[FirstAvailable(name="f", alternatives=(slice_,))], kueue_compatible=False)
    old = _app("1.33")
    with pytest.raises(DraConstructsError, match=r"1\.34"):
        GpuClaimTemplate(cdk8s.Chart(old, "c"), "t", requests=[slice_], kueue_compatible=True)


def test_device_class_policy_admits_only_the_tenants_classes() -> None:
    chart = cdk8s.Chart(_app("1.34"), "p")
    GpuTenant(chart, "team-a", quotas={H100_SLICE: 2})
    [policy] = [d for d in _docs(chart.node.root) if d["kind"] == "ValidatingAdmissionPolicy"  # type: ignore[arg-type]
                and d["metadata"]["name"] == "dra-tenant-team-a-device-classes"]

    def claim(requests: list[dict[str, Any]], kind: str = "ResourceClaimTemplate") -> dict[str, Any]:
        spec = {"devices": {"requests": requests}}
        return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "x", "namespace": "team-a"},
                "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}

    own = {"name": "r", "exactly": {"deviceClassName": "h100-80gb-1g.10gb.mig.dra-constructs.io"}}
    assert evaluate(policy, claim([own])) == []
    assert evaluate(policy, claim([own], "ResourceClaim")) == []
    denied = evaluate(policy, claim([own, {"name": "s", "exactly": {"deviceClassName": "mig.nvidia.com"}}]))
    assert len(denied) == 1 and denied[0].startswith("DRA012: request s names a DeviceClass outside")
    alternative = {"name": "f", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}]}
    assert evaluate(policy, claim([alternative]))
    flat = {"name": "v", "deviceClassName": "other.example.com"}
    assert evaluate(policy, {**claim([flat]), "apiVersion": "resource.k8s.io/v1beta1"})


def test_kueue_crd_validation_catches_what_the_api_server_refuses() -> None:
    good = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "q"},
            "spec": {"resourceGroups": [{"coveredResources": ["x/y"], "flavors": [
                {"name": "f", "resources": [{"name": "x/y", "nominalQuota": 1}]}]}]}}
    validate_kueue(good)
    borrowing = {**good, "spec": {"resourceGroups": [{"coveredResources": ["x/y"], "flavors": [
        {"name": "f", "resources": [{"name": "x/y", "nominalQuota": 1, "borrowingLimit": 1}]}]}]}}
    with pytest.raises(ValueError, match="borrowingLimit must be nil when cohort is empty"):
        validate_kueue(borrowing)
    mismatch = {**good, "spec": {"resourceGroups": [{"coveredResources": ["x/y", "cpu"], "flavors": [
        {"name": "f", "resources": [{"name": "x/y", "nominalQuota": 1}]}]}]}}
    with pytest.raises(ValueError, match="same number of resources"):
        validate_kueue(mismatch)
    with pytest.raises(Exception, match="cohrt"):
        validate_kueue({**good, "spec": {**good["spec"], "cohrt": "x"}})


class _Policy:
    """Stands for a typed config that renders itself (the sanitizer's PreemptionPolicy has .opaque())."""

    def opaque(self) -> dict[str, Any]:
        return {"driver": "sanitizer.dra-constructs.io",
                "parameters": {"apiVersion": "sanitizer.dra-constructs.io/v1alpha1", "kind": "PreemptionPolicy",
                               "gracePeriodSeconds": 30}}


def test_device_config_goes_on_the_platform_classes_and_keeps_claims_admissible() -> None:
    app = _app("1.34")
    chart = cdk8s.Chart(app, "p")
    platform = TenantPlatform(chart, "shared", device_config=[_Policy()])
    tenant = GpuTenant(chart, "team-a", quotas={H100_SLICE: 1}, kueue=KueueQueue(), platform=platform)
    tenant.claim_template(cdk8s.Chart(app, "apps", namespace="team-a"), "slice", H100_SLICE)
    docs = _docs(app)
    for doc in docs:
        validate_any_schema(doc, "1.34")
    [device_class] = _of(docs, "DeviceClass")
    assert device_class["spec"]["config"] == [{"opaque": _Policy().opaque()}]
    [template] = _of(docs, "ResourceClaimTemplate")
    assert "config" not in template["spec"]["spec"]["devices"]
    with pytest.raises(DraConstructsError, match="opaque parameters need apiVersion and kind"):
        TenantPlatform(cdk8s.Chart(_app("1.34"), "p"), "x", device_config=[{"driver": "a.b", "parameters": {}}])


@pytest.mark.parametrize("version", ["1.32", "1.33"])
def test_tenants_without_kueue_validate_on_older_targets(version: str) -> None:
    app = _app(version)
    chart = cdk8s.Chart(app, "p")
    tenant = GpuTenant(chart, "team-a", quotas={H100_SLICE: 2, WholeGpu(GpuModel.A100_80GB): 1})
    tenant.claim_template(cdk8s.Chart(app, "apps", namespace="team-a"), "gpu", WholeGpu(GpuModel.A100_80GB))
    docs = _docs(app)
    for doc in docs:
        validate_any_schema(doc, version)
    assert {d["apiVersion"] for d in _of(docs, "DeviceClass")} == {Target.parse(version).resource_api_version}
    assert not _of(docs, "ClusterQueue") and tenant.queue_labels == {}
