"""The admission policy: schema-valid, and its CEL evaluated on real objects agrees with the rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cdk8s
import kubernetes_validate
import pytest
import yaml

from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import GuardrailsAdmissionPolicy, audit, ensure_guardrails, load_paths
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.policy import POLICY_RULES, admission_policy_manifests

from .helpers import FIXTURES, claim_template, gpu_pod_spec, mig_request, pod
from .vap import denied_rules, evaluate

POLICIES = admission_policy_manifests()
ALL_FIXTURES = sorted((FIXTURES / "compliant").iterdir()) + sorted((FIXTURES / "noncompliant").iterdir())


@pytest.mark.parametrize("version", ["1.32.0", "1.34.0"])
def test_manifests_are_schema_valid(version: str) -> None:
    kinds = [m["kind"] for m in POLICIES]
    assert kinds.count("ValidatingAdmissionPolicy") == 5 and kinds.count("ValidatingAdmissionPolicyBinding") == 5
    for manifest in POLICIES:
        kubernetes_validate.validate(manifest, version, strict=True)


def _declared_policies(manifests: list[Manifest]) -> list[dict[str, Any]]:
    """The policies a user of the fixture would deploy: with what the fixture says the cluster allows."""
    # Names a DeviceClass of the fixture maps (KEP-5004) are declared to the policy.
    mapped = [m.obj["spec"]["extendedResourceName"] for m in manifests
              if m.kind == "DeviceClass" and "extendedResourceName" in m.obj.get("spec", {})]
    # Namespaces allowed the admin-access label: the sanitizer's, and those suppressing DRA019 with a reason
    # (the policy sees neither the DaemonSet nor honours a suppression: they are named to it).
    admin = [m.name for m in manifests if m.kind == "Namespace" and "DRA019" in str(m.annotations())]
    admin += [m.namespace for m in manifests
              if m.kind == "DaemonSet" and m.pod_labels().get("dra-constructs.io/component") == "sanitizer"]
    if not mapped and not admin:
        return POLICIES
    return admission_policy_manifests(dra_extended_resources=mapped, admin_access_namespaces=sorted(set(admin)))


def test_compliant_fixtures_are_admitted() -> None:
    for path in sorted((FIXTURES / "compliant").iterdir()):
        manifests = load_paths([str(path)])
        policies = _declared_policies(manifests)
        for m in manifests:
            assert denied_rules(policies, m.obj) == set(), f"{path.name}: {m.object_id}"


def test_dra_extended_resources_are_admitted_device_plugin_names_refused() -> None:
    def gpu_pod(name: str) -> dict[str, Any]:
        return pod({"containers": [{"name": "app", "image": "x", "resources": {"limits": {name: 1}}}]})

    declared = admission_policy_manifests(dra_extended_resources=["nvidia.com/gpu"])
    assert denied_rules(POLICIES, gpu_pod("deviceclass.resource.kubernetes.io/gpu.nvidia.com")) == set()
    assert denied_rules(POLICIES, gpu_pod("nvidia.com/gpu")) == {"DRA001"}
    assert denied_rules(declared, gpu_pod("nvidia.com/gpu")) == set()
    assert denied_rules(declared, gpu_pod("nvidia.com/mig-1g.10gb")) == {"DRA001"}


def test_construct_takes_the_apps_declared_extended_resources() -> None:
    from dra_constructs import set_dra_extended_resources, set_kubernetes_version

    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.36")
    set_dra_extended_resources(app, {"nvidia.com/gpu": "gpu.nvidia.com"})
    chart = cdk8s.Chart(app, "c")
    policy = GuardrailsAdmissionPolicy(chart, "g")
    obj = pod({"containers": [{"name": "app", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]})
    assert denied_rules(policy.manifests, obj) == set()


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: p.name)
def test_policy_denies_only_what_the_audit_reports(path: Path) -> None:
    manifests = load_paths([str(path)])
    result = audit(manifests)
    policies = _declared_policies(manifests)
    for m in manifests:
        denied = denied_rules(policies, m.obj)
        assert not any(rule.startswith("ERROR") for rule in denied), denied
        reported = {f.rule for f in result.errors if f.object == m.object_id}
        assert denied <= reported, f"{path.name}: {m.object_id}: policy {denied} vs audit {reported}"


@pytest.mark.parametrize(("fixture", "kind", "rules"), [
    ("guideline-unsafe-pod.yaml", "Pod", {"DRA001", "DRA002"}),
    ("deployment-device-plugin.yaml", "Deployment", {"DRA001"}),
    ("mig-extended-resource-job.yaml", "Job", {"DRA001"}),
    ("cuda-visible-devices-statefulset.yaml", "StatefulSet", {"DRA002"}),
    ("mps-env-cronjob.yaml", "CronJob", {"DRA001", "DRA002", "DRA006"}),
    # DRA006 per object, found missing by the real-server differential (tests/controlplane):
    ("kai-gpu-fraction.yaml", "Pod", {"DRA006"}),
    ("consumable-capacity-claim.yaml", "ResourceClaimTemplate", {"DRA006"}),
    ("tenant-consumable-capacity.yaml", "ResourceClaimTemplate", {"DRA006"}),
    ("missing-container-claims.yaml", "Deployment", {"DRA005"}),
    ("undeclared-claim-reference.yaml", "Pod", {"DRA005"}),
    ("unused-pod-claim-list.json", "Pod", {"DRA005"}),
    ("pod-claim-source.yaml", "Pod", {"DRA007"}),
    ("zero-grace-deployment.yaml", "Deployment", {"DRA008"}),
    ("claim-allocation-all.yaml", "ResourceClaimTemplate", {"DRA003"}),
    ("gpu-test-mps.yaml", "ResourceClaimTemplate", {"DRA006"}),
    ("gpu-test-timeslicing-v1.yaml", "ResourceClaimTemplate", {"DRA006"}),
    ("wait-for-first-consumer.yaml", "ResourceClaimTemplate", {"DRA007"}),
    ("v1alpha3-claim.yaml", "ResourceClaim", {"DRA007"}),
    ("v1alpha2-classic-claim.yaml", "ResourceClaimTemplate", {"DRA007"}),
])
def test_policy_refuses_the_unsafe_fixtures(fixture: str, kind: str, rules: set[str]) -> None:
    objects = [m.obj for m in load_paths([str(FIXTURES / "noncompliant" / fixture)]) if m.kind == kind]
    assert objects
    assert set().union(*(denied_rules(POLICIES, obj) for obj in objects)) == rules


def _policy(suffix: str, policies: list[dict[str, Any]] = POLICIES) -> dict[str, Any]:
    return next(p for p in policies
                if p["kind"] == "ValidatingAdmissionPolicy" and p["metadata"]["name"].endswith(suffix))


def test_messages_name_the_container_and_claim() -> None:
    spec = gpu_pod_spec()
    spec["containers"].append({"name": "sidecar", "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "1"}],
                               "resources": {"limits": {"nvidia.com/gpu": 1}, "claims": [{"name": "nope"}]}})
    spec["resourceClaims"].append({"name": "spare", "resourceClaimTemplateName": "t"})
    messages = evaluate(_policy("-pods"), pod(spec))
    assert [m.split(":")[0] for m in messages] == ["DRA001", "DRA002", "DRA005", "DRA005"]
    assert "container sidecar requests" in messages[0] and "container sidecar selects" in messages[1]
    assert "container sidecar references" in messages[2] and "pod claim spare is not listed" in messages[3]


def test_hiding_values_and_admin_access_are_admitted() -> None:
    cpu = pod({"containers": [{"name": "c", "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "-1"},
                                                     {"name": "NVIDIA_VISIBLE_DEVICES"}]}]})
    assert evaluate(_policy("-pods"), cpu) == []
    admin = claim_template([{"name": "all", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All",
                             "adminAccess": True}])
    assert evaluate(_policy("-claims"), admin) == []
    exactly = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}
    v1_all = claim_template([{"name": "all", "exactly": exactly}], version="v1")
    assert [m.split(":")[0] for m in evaluate(_policy("-claims"), v1_all)] == ["DRA003"]


def test_suppression_annotation_is_honoured_per_rule() -> None:
    mps = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": {"strategy": "MPS"}}}}]
    template = claim_template([mig_request()], config=mps)
    assert evaluate(_policy("-claims"), template) != []
    template["metadata"]["annotations"] = {
        "guardrails.dra-constructs.io/suppressions": '[{"reason": "single tenant", "rule":"DRA006"}]'}
    assert evaluate(_policy("-claims"), template) == []
    template["metadata"]["annotations"]["guardrails.dra-constructs.io/suppressions"] = (
        '[{"rule": "DRA003", "reason": "other rule"}]')
    assert evaluate(_policy("-claims"), template) != []
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {
        "metadata": {"annotations": {"guardrails.dra-constructs.io/suppressions":
                                     '[{"rule": "DRA001", "reason": "legacy pool"}]'}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}
    assert evaluate(_policy("-workloads"), deployment) == []


def test_claims_generated_from_templates_are_skipped() -> None:
    mps = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": {"strategy": "MPS"}}}}]
    claim = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
             "metadata": {"name": "pod-gpu-x7k2", "namespace": "ml"},
             "spec": {"devices": {"requests": [mig_request()], "config": mps}}}
    assert [m.split(":")[0] for m in evaluate(_policy("-claims"), claim)] == ["DRA006"]
    claim["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert evaluate(_policy("-claims"), claim) == []


@pytest.mark.parametrize(("opaque", "denied"), [
    ({"driver": "gpu.nvidia.com", "parameters": {"sharing": {"strategy": "timeSlicing"}}}, True),
    ({"driver": "x.example.com", "parameters": {"apiVersion": "resource.nvidia.com/v1beta1",
                                                 "sharing": {"strategy": "MPS"}}}, True),
    # Another driver's TimeSlicing (the DRA example driver's) is not the NVIDIA sharing DRA006 means; the
    # real API server's differential (tests/controlplane) found the policy refusing it where audit does not.
    ({"driver": "gpu.example.com", "parameters": {"apiVersion": "gpu.resource.example.com/v1alpha1",
                                                   "sharing": {"strategy": "TimeSlicing"}}}, False),
])
def test_sharing_is_refused_as_the_audit_reports_it(opaque: dict[str, Any], denied: bool) -> None:
    claim = claim_template([mig_request()], config=[{"opaque": opaque}])
    assert ([m.split(":")[0] for m in evaluate(_policy("-claims"), claim)] == ["DRA006"]) is denied
    result = audit([claim], kubernetes_version="1.37")
    assert ("DRA006" in {f.rule for f in result.errors}) is denied


def test_rule_selection_and_bad_options() -> None:
    only = admission_policy_manifests("x", rules=("DRA001",), validation_actions=("Warn", "Audit"),
                                      excluded_namespaces=())
    assert [m["metadata"]["name"] for m in only] == ["x-pods", "x-pods", "x-workloads", "x-workloads",
                                                     "x-cronjobs", "x-cronjobs"]
    assert all("matchResources" not in m["spec"] for m in only if m["kind"].endswith("Binding"))
    with pytest.raises(DraConstructsError, match="not enforceable"):
        admission_policy_manifests(rules=("DRA009",))
    with pytest.raises(DraConstructsError, match="without both Deny and Warn"):
        admission_policy_manifests(validation_actions=("Deny", "Warn"))
    with pytest.raises(DraConstructsError, match="DNS subdomain"):
        admission_policy_manifests("Bad_Name")
    assert set(POLICY_RULES) >= {"DRA001", "DRA002", "DRA005", "DRA007"}


def test_construct_synthesizes_the_policies(tmp_path: Path) -> None:
    app = cdk8s.App(outdir=str(tmp_path))
    chart = cdk8s.Chart(app, "guardrails")
    ensure_guardrails(chart)
    policy = GuardrailsAdmissionPolicy(chart, "policy", excluded_namespaces=("kube-system", "gpu-operator"))
    synthesized = [d for d in yaml.safe_load_all(app.synth_yaml()) if d]
    assert synthesized == policy.manifests
    binding = next(d for d in synthesized if d["kind"] == "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "gpu-operator", "kube-system"]
    for doc in synthesized:
        kubernetes_validate.validate(doc, "1.32.0", strict=True)
