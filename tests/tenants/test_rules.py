"""DRA012 (quota over the set), DRA013 (tenant-exclusive devices), DRA014 (Kueue-admissible claims)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_constructs.guardrails import Severity, audit
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.tenancy import claim_device_usage, pod_counts

CLASS = "h100-80gb-1g.10gb.mig.dra-constructs.io"


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"dra-constructs.io/tenant": name, **labels}}}


def quota(ns: str, hard: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpu-devices", "namespace": ns},
            "spec": {"hard": hard, **spec}}


def template(ns: str, name: str = "slice", count: int = 1, device_class: str = CLASS,
             **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "mig", "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount",
                                            "count": count, **extra}}]}}}}


def deployment(ns: str, name: str = "app", replicas: int = 1, claim: str = "slice",
               labels: dict[str, str] | None = None, strategy: dict[str, Any] | None = None,
               by_name: bool = False) -> dict[str, Any]:
    entry = {"name": "gpu", ("resourceClaimName" if by_name else "resourceClaimTemplateName"): claim}
    spec: dict[str, Any] = {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
        "metadata": {"labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 60, "resourceClaims": [entry],
                 "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]}}}
    if strategy is not None:
        spec["strategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": spec}


RECREATE = {"type": "Recreate"}


def tenant_set(replicas: int, hard: int = 4, **kwargs: Any) -> list[dict[str, Any]]:
    return [namespace("team-b"), quota("team-b", {f"{CLASS}.deviceclass.resource.k8s.io/devices": hard}),
            template("team-b"), deployment("team-b", replicas=replicas, strategy=RECREATE, **kwargs)]


def rules(result: Any, severity: Severity = Severity.ERROR) -> set[str]:
    return {f.rule for f in result.findings if f.severity is severity}


def test_fitting_the_quota_is_clean_and_one_slice_more_is_an_error() -> None:
    assert audit(tenant_set(4), kubernetes_version="1.34").findings == ()
    result = audit(tenant_set(5), kubernetes_version="1.34")
    [finding] = result.findings
    assert (finding.rule, finding.severity, finding.object) == ("DRA012", Severity.ERROR, "Deployment/team-b/app")
    assert finding.path == "spec.template.spec.resourceClaims[0].resourceClaimTemplateName"
    assert "needs 5 of" in finding.message and "allows 4" in finding.message and len(finding.message) <= 200
    assert finding.details == (f"Deployment/app {finding.path}: 5 pods x 1 x {CLASS} (template 'slice')",)


def test_one_finding_per_violation_when_the_same_devices_are_over_two_quota_keys() -> None:
    docs = tenant_set(5)
    docs[1]["spec"]["hard"][f"requests.deviceclass.resource.kubernetes.io/{CLASS}"] = 4  # 1.34+: the same devices
    result = audit(docs, kubernetes_version="1.36")
    [finding] = result.findings
    assert finding.rule == "DRA012" and len(finding.message) <= 200
    assert finding.details[-1] == f"also over: requests.deviceclass.resource.kubernetes.io/{CLASS}"
    assert finding.to_dict()["details"] == list(finding.details)


def test_usage_is_summed_over_workloads_claims_and_counts() -> None:
    docs = [*tenant_set(2), template("team-b", "pair", count=2),
            deployment("team-b", "other", replicas=1, claim="pair", strategy=RECREATE)]
    assert audit(docs, kubernetes_version="1.34").findings == ()  # 2 x 1 + 1 x 2 = 4
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "x", "namespace": "team-b"}, "spec": template("team-b")["spec"]["spec"]}
    result = audit([*docs, claim], kubernetes_version="1.34")
    [finding] = result.findings  # one violation, on the largest contributor; every contributor in details
    assert finding.object == "Deployment/team-b/app" and "needs 5" in finding.message
    assert "3 objects contribute" in finding.message
    assert [d.split(" ")[0] for d in finding.details] == ["Deployment/app", "Deployment/other", "ResourceClaim/x"]


def test_rolling_update_surge_past_the_quota_is_a_warning() -> None:
    docs = tenant_set(4)
    docs[-1]["spec"].pop("strategy")  # default RollingUpdate, maxSurge 25% -> 1 more pod
    [finding] = audit(docs, kubernetes_version="1.34").findings
    assert (finding.rule, finding.severity, finding.path) == ("DRA012", Severity.WARNING, "spec.strategy")
    assert "runs 5" in finding.message


def test_other_quota_shapes() -> None:
    scoped = [quota("team-b", {f"{CLASS}.deviceclass.resource.k8s.io/devices": 1},
                                         scopes=["BestEffort"]), template("team-b"),
              deployment("team-b", replicas=3, strategy=RECREATE)]
    assert "DRA012" not in rules(audit(scoped, kubernetes_version="1.34"))  # scoped quotas never match claims
    counted = [quota("ns", {"count/resourceclaims.resource.k8s.io": "2"}), template("ns"),
               deployment("ns", replicas=3, strategy=RECREATE)]
    assert rules(audit(counted, kubernetes_version="1.34")) == {"DRA012"}


def test_dra_backed_extended_resources_share_the_class_quota_from_1_36() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    docs = [quota("ns", {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 0}), pod]
    assert "DRA012" in rules(audit(docs, kubernetes_version="1.36"))
    assert "DRA012" not in rules(audit(docs, kubernetes_version="1.34"))  # device plugin: not the class quota
    assert "DRA012" in rules(audit([quota("ns", {"requests.nvidia.com/gpu": 0}), pod], kubernetes_version="1.34"))


def test_a_tenant_class_without_quota_is_an_error() -> None:
    docs = [namespace("team-a"), quota("team-a", {f"{CLASS}.deviceclass.resource.k8s.io/devices": 1}),
            template("team-a", device_class="other.example.com")]
    [finding] = [f for f in audit(docs, kubernetes_version="1.34").findings if f.rule == "DRA012"]
    assert "no ResourceQuota on DeviceClass 'other.example.com'" in finding.message


def test_claim_usage_follows_the_quota_evaluator() -> None:
    spec = {"devices": {"requests": [
        {"name": "a", "firstAvailable": [{"name": "x", "deviceClassName": "g", "allocationMode": "ExactCount",
                                          "count": 2}, {"name": "y", "deviceClassName": "g", "count": 3},
                                         {"name": "z", "deviceClassName": "m"}]},
        {"name": "b", "exactly": {"deviceClassName": "g", "allocationMode": "All", "adminAccess": True}},
        {"name": "c", "deviceClassName": "m", "count": 2}]}}
    claim = Manifest({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
                      "spec": spec})
    assert dict(claim_device_usage(claim)) == {"g": 3 + 32, "m": 1 + 2}
    deploy = Manifest({"kind": "Deployment", "spec": {"replicas": 8, "strategy": {
        "rollingUpdate": {"maxSurge": "10%"}}, "template": {"spec": {"containers": [{"name": "c"}]}}}})
    assert pod_counts(deploy) == (8, 9)
    job = Manifest({"kind": "Job", "spec": {"parallelism": 4, "completions": 2,
                                            "template": {"spec": {"containers": [{"name": "c"}]}}}})
    assert pod_counts(job) == (2, 2)


@pytest.mark.parametrize(("extra", "path"), [
    ({"capacity": {"requests": {"memory": "20Gi"}}}, "exactly.capacity.requests"),
    ({"adminAccess": True}, "exactly.adminAccess"),
    ({"selectors": [{"cel": {"expression": "device.allowMultipleAllocations"}}]}, "selectors[0]"),
])
def test_tenant_claims_never_share_devices(extra: dict[str, Any], path: str) -> None:
    docs = [namespace("team-a"), quota("team-a", {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": 1}),
            template("team-a", device_class="gpu.nvidia.com", **extra)]
    findings = [f for f in audit(docs, kubernetes_version="1.36").findings if f.rule == "DRA013"]
    assert findings and findings[0].severity is Severity.ERROR and path in findings[0].path
    plain = [template("elsewhere", device_class="gpu.nvidia.com", **extra)]
    assert "DRA013" not in rules(audit(plain, kubernetes_version="1.36"))  # not a tenant namespace


def test_a_tenant_namespace_never_allows_admin_access() -> None:
    docs = [namespace("team-a", **{"resource.kubernetes.io/admin-access": "true"})]
    findings = audit(docs, kubernetes_version="1.35").findings
    assert [(f.rule, f.object) for f in findings if f.rule == "DRA013"] == [("DRA013", "Namespace//team-a")]
    assert {f.rule for f in findings} == {"DRA013", "DRA019"}  # DRA019: no sanitizer DaemonSet runs there


def _queue(ns: str) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "gpu", "namespace": ns},
            "spec": {"clusterQueue": f"{ns}-gpu"}}


QUEUED = {"kueue.x-k8s.io/queue-name": "gpu"}


@pytest.mark.parametrize("change", ["firstAvailable", "constraints", "config", "All", "claim"])
def test_kueue_managed_claims_must_be_admissible(change: str) -> None:
    claim = template("q")
    devices = claim["spec"]["spec"]["devices"]
    if change == "firstAvailable":
        devices["requests"] = [{"name": "mig", "firstAvailable": [{"name": "a", "deviceClassName": CLASS}]}]
    elif change == "constraints":
        devices["constraints"] = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]
    elif change == "config":
        devices["config"] = [{"opaque": {"driver": "gpu.nvidia.com",
                                         "parameters": {"apiVersion": "a/v1", "kind": "K"}}}]
    elif change == "All":
        devices["requests"][0]["exactly"]["allocationMode"] = "All"
        devices["requests"][0]["exactly"].pop("count")
    work = deployment("q", labels=QUEUED, by_name=change == "claim", strategy=RECREATE)
    assert "DRA014" not in rules(audit([template("q"), deployment("q", labels=QUEUED, strategy=RECREATE)],
                                       kubernetes_version="1.34"))
    findings = [f for f in audit([claim, work], kubernetes_version="1.34").findings if f.rule == "DRA014"]
    assert findings and all(f.severity is Severity.ERROR for f in findings)
    assert findings[0].object == "Deployment/q/app"
    # a LocalQueue in the namespace makes it Kueue-managed too
    unlabelled = deployment("q", by_name=change == "claim", strategy=RECREATE)
    assert "DRA014" in rules(audit([_queue("q"), claim, unlabelled], kubernetes_version="1.34"))


@pytest.mark.parametrize(("label", "flagged"), [
    ("0.19", {"firstAvailable"}), ("0.18", {"firstAvailable", "constraints"}),
    (None, {"firstAvailable", "constraints"}), ("bad", {"firstAvailable", "constraints"})])
def test_kueue_0_19_admits_constraints_by_the_platforms_version_label(label: str | None, flagged: set[str]) -> None:
    labels = {"dra-constructs.io/component": "kueue-configuration"}
    if label is not None:
        labels["dra-constructs.io/kueue-version"] = label
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "m", "namespace": "kueue-system",
                                                                    "labels": labels},
              "data": {"c.yaml": "resources:\n  deviceClassMappings:\n  - name: x/y\n"
                                 f"    deviceClassNames: [{CLASS}]\n"}}
    found = set()
    for change in ("firstAvailable", "constraints"):
        claim = template("q")
        devices = claim["spec"]["spec"]["devices"]
        if change == "firstAvailable":
            devices["requests"] = [{"name": "mig", "firstAvailable": [{"name": "a", "deviceClassName": CLASS}]}]
        else:
            devices["constraints"] = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]
        work = deployment("q", labels=QUEUED, strategy=RECREATE)
        if "DRA014" in rules(audit([config, claim, work], kubernetes_version="1.34")):
            found.add(change)
    assert found == flagged


def test_unmapped_class_and_unqueued_workload() -> None:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "m", "namespace": "kueue-system", "labels": {"dra-constructs.io/component": "kueue-configuration"}},
        "data": {"c.yaml": "resources:\n  deviceClassMappings:\n  - name: x/y\n    deviceClassNames: [other]\n"}}
    docs = [config, template("q"), deployment("q", labels=QUEUED, strategy=RECREATE)]
    [finding] = audit(docs, kubernetes_version="1.34").findings
    assert finding.rule == "DRA014" and "do not map" in finding.message
    result = audit([_queue("q"), template("q"), deployment("q", strategy=RECREATE)], kubernetes_version="1.34")
    [warning] = result.findings
    assert (warning.rule, warning.severity) == ("DRA014", Severity.WARNING) and "bypasses Kueue" in warning.message


def test_a_tenant_workload_never_uses_another_tenants_claim() -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "whole-h100", "namespace": "team-b"},
             "spec": template("team-b", device_class="gpu.nvidia.com")["spec"]["spec"]}
    docs = [namespace("team-a"), namespace("team-b"), claim,
            deployment("team-a", claim="whole-h100", by_name=True, strategy=RECREATE)]
    findings = audit(docs, kubernetes_version="1.34").findings
    [sharing] = [f for f in findings if f.rule == "DRA013"]
    assert sharing.object == "Deployment/team-a/app" and "belongs to tenant namespace(s) team-b" in sharing.message
    assert "DRA006" in {f.rule for f in findings}  # the cross-namespace reference, for any namespace
