"""DRA019-DRA021, the guardrails the field asked for at 1.36/1.37 (issue 24 item 9)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import audit
from dra_constructs.guardrails.policy import admission_policy_manifests

from .helpers import claim_template, mig_request, pod, rules_of
from .vap import denied_rules, evaluate

POLICIES = admission_policy_manifests()
NEW = "resource.kubernetes.io/admin-access"
OLD = "resource.k8s.io/admin-access"


def _suppress(obj: dict[str, Any], rule: str, reason: str = "reviewed by the platform team") -> dict[str, Any]:
    obj["metadata"].setdefault("annotations", {})["guardrails.dra-constructs.io/suppressions"] = json.dumps(
        [{"rule": rule, "reason": reason}])
    return obj


def _found(objects: list[dict[str, Any]], rule: str, version: str = "1.36") -> list[str]:
    """``object path`` of every error finding of ``rule``."""
    result = audit(objects, kubernetes_version=version)
    return sorted(f"{f.object} {f.path}" for f in result.errors if f.rule == rule)


# --- DRA019: the admin-access label ------------------------------------------------------------

def _namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}


def _sanitizer(namespace: str, claims: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "agent", "image": "x"}]}
    if claims:
        spec["resourceClaims"] = [{"name": "all", "resourceClaimTemplateName": "all-gpus"}]
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "dra-sanitizer", "namespace": namespace,
                         "labels": {"dra-constructs.io/component": "sanitizer"}},
            "spec": {"selector": {"matchLabels": {"app": "s"}},
                     "template": {"metadata": {"labels": {"app": "s"}}, "spec": spec}}}


def test_an_admin_access_namespace_is_an_error_unless_it_is_the_sanitizers() -> None:
    team = _namespace("team-ml", **{NEW: "true"})
    assert _found([team], "DRA019") == [f"Namespace//team-ml metadata.labels['{NEW}']"]
    finding = next(f for f in audit([team], kubernetes_version="1.36").errors if f.rule == "DRA019")
    assert "141293" in finding.message and "sanitizer" in finding.fix
    # The sanitizer's namespace is the exception, also for a 0.1 agent with an admin claim (it needs the label).
    sanitizer_ns = _namespace("dra-sanitizer", **{NEW: "true", OLD: "true"})
    assert _found([sanitizer_ns, _sanitizer("dra-sanitizer")], "DRA019", "1.34") == []
    assert _found([sanitizer_ns, _sanitizer("dra-sanitizer", claims=True)], "DRA019", "1.34") == []
    # A sanitizer elsewhere exempts nothing; neither does the component label on the Namespace itself.
    assert _found([team, _sanitizer("dra-sanitizer")], "DRA019") != []
    labelled = _namespace("team-ml", **{NEW: "true", "dra-constructs.io/component": "sanitizer"})
    assert _found([labelled], "DRA019") != []


@pytest.mark.parametrize(("labels", "version", "expected"), [
    ({NEW: "false"}, "1.36", []),
    ({NEW: "True"}, "1.36", []),  # the API server compares "true" case-sensitively
    ({OLD: "true"}, "1.34", [OLD]),  # 1.33-1.34 honour the old spelling
    ({OLD: "true"}, "1.37", []),  # a dead label from 1.35
    ({NEW: "true"}, "1.33", [NEW]),  # not honoured yet, but an upgrade makes it effective
    ({OLD: "true", NEW: "true"}, "1.34", [OLD, NEW]),
])
def test_which_labels_count_per_target(labels: dict[str, str], version: str, expected: list[str]) -> None:
    paths = _found([_namespace("team-ml", **labels)], "DRA019", version)
    assert paths == sorted(f"Namespace//team-ml metadata.labels['{key}']" for key in expected)


def test_a_node_agents_namespace_takes_a_reasoned_suppression() -> None:
    agent = _suppress(_namespace("gpu-monitoring", **{NEW: "true"}), "DRA019")
    result = audit([agent], kubernetes_version="1.36")
    assert "DRA019" not in rules_of(result, "error")
    assert [s.finding.rule for s in result.suppressed] == ["DRA019"]


def test_the_namespace_policy_refuses_the_label_and_honours_no_suppression() -> None:
    for labels in ({NEW: "true"}, {OLD: "true"}):
        messages = [m for p in POLICIES if p["kind"] == "ValidatingAdmissionPolicy"
                    for m in evaluate(p, _namespace("team-ml", **labels))
                    if p["metadata"]["name"].endswith("-namespaces")]
        assert len(messages) == 1 and messages[0].startswith("DRA019: Namespace team-ml") \
            and "=true" in messages[0], messages
    assert denied_rules(POLICIES, _suppress(_namespace("team-ml", **{NEW: "true"}), "DRA019")) == {"DRA019"}
    assert denied_rules(POLICIES, _namespace("team-ml", **{NEW: "false"})) == set()
    assert denied_rules(POLICIES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bare"}}) == set()
    allowed = admission_policy_manifests(admin_access_namespaces=["dra-sanitizer"])
    assert denied_rules(allowed, _namespace("dra-sanitizer", **{NEW: "true"})) == set()
    assert denied_rules(allowed, _namespace("team-ml", **{NEW: "true"})) == {"DRA019"}
    assert denied_rules(admission_policy_manifests(rules=["DRA001"]), _namespace("x", **{NEW: "true"})) == set()


def test_admin_access_namespaces_must_be_namespace_names() -> None:
    with pytest.raises(DraConstructsError, match="admin_access_namespaces"):
        admission_policy_manifests(admin_access_namespaces=["Team_ML"])


def test_a_tenants_policy_keeps_the_tenant_from_labelling_its_namespace() -> None:
    policies = admission_policy_manifests("dra-guardrails-team-a", namespaces=("team-a",))
    binding = next(p for p in policies if p["kind"] == "ValidatingAdmissionPolicyBinding"
                   and p["spec"]["policyName"].endswith("-namespaces"))
    # For a Namespace object the binding's namespaceSelector matches the Namespace's own labels.
    assert binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a"]
    assert denied_rules(policies, _namespace("team-a", **{NEW: "true"})) == {"DRA019"}


# --- DRA020: DRA GPUs under gVisor ----------------------------------------------------------------

def _claim_pod(runtime_class: str | None, template: str = "t", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"terminationGracePeriodSeconds": 30,
                            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                            "containers": [{"name": "app", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
                            **spec}
    if runtime_class is not None:
        body["runtimeClassName"] = runtime_class
    return pod(body)


def _runtime_class(name: str, handler: str) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": handler}


GPU_TEMPLATE = claim_template([mig_request()])
NIC_TEMPLATE = claim_template([{"name": "nic", "deviceClassName": "rdma.example.com", "allocationMode": "ExactCount",
                                "count": 1}], name="nic")


@pytest.mark.parametrize("runtime_class", ["gvisor", "runsc", "gVisor", "runsc-nvproxy"])
def test_a_gpu_claim_under_gvisor_is_an_error_in_audit_and_at_admission(runtime_class: str) -> None:
    gvisor_pod = _claim_pod(runtime_class)
    assert _found([GPU_TEMPLATE, gvisor_pod], "DRA020", "1.34") == ["Pod/ml/p spec.runtimeClassName"]
    finding = next(f for f in audit([GPU_TEMPLATE, gvisor_pod], kubernetes_version="1.34").errors
                   if f.rule == "DRA020")
    assert "13620" in finding.message and "every GPU" in finding.message and "runc" in finding.fix
    assert "DRA020" in denied_rules(POLICIES, gvisor_pod)


def test_a_runtime_class_is_gvisor_by_its_handler() -> None:
    sandboxed = _claim_pod("sandboxed")
    assert _found([_runtime_class("sandboxed", "runsc"), GPU_TEMPLATE, sandboxed], "DRA020", "1.34") != []
    assert _found([_runtime_class("sandboxed", "kata-qemu"), GPU_TEMPLATE, sandboxed], "DRA020", "1.34") == []
    assert _found([_runtime_class("nvidia", "nvidia"), GPU_TEMPLATE, _claim_pod("nvidia")], "DRA020", "1.34") == []


def test_what_is_not_a_dra_gpu_under_gvisor() -> None:
    cpu_only = pod({"runtimeClassName": "gvisor", "containers": [{"name": "c", "image": "x"}]})
    assert _found([cpu_only], "DRA020") == [] and denied_rules(POLICIES, cpu_only) == set()
    assert _found([GPU_TEMPLATE, _claim_pod(None)], "DRA020") == []
    # A NIC claim is not a GPU: the audit knows the template; the policy cannot and refuses any claim.
    nic_pod = _claim_pod("gvisor", template="nic")
    assert _found([NIC_TEMPLATE, nic_pod], "DRA020") == []
    assert "DRA020" in denied_rules(POLICIES, nic_pod)


def test_unknown_claims_and_dra_extended_resources_count_as_gpus() -> None:
    assert _found([_claim_pod("gvisor", template="elsewhere")], "DRA020") != []  # fails closed
    limits = {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": 1}
    implicit = pod({"runtimeClassName": "runsc", "terminationGracePeriodSeconds": 30,
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]})
    assert _found([implicit], "DRA020", "1.36") == ["Pod/ml/p spec.runtimeClassName"]
    assert _found([implicit], "DRA020", "1.33") == []  # no extended resources through DRA before 1.34
    assert "DRA020" in denied_rules(POLICIES, implicit)
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
                  "spec": {"template": {"metadata": {}, "spec": _claim_pod("gvisor")["spec"]}}}
    assert _found([GPU_TEMPLATE, deployment], "DRA020", "1.34") == [
        "Deployment/ml/d spec.template.spec.runtimeClassName"]
    assert "DRA020" in denied_rules(POLICIES, deployment)


def test_dra020_suppression_is_honoured() -> None:
    suppressed = _suppress(_claim_pod("gvisor"), "DRA020", "single-GPU node pool, one pod per node")
    assert _found([GPU_TEMPLATE, suppressed], "DRA020") == []
    assert denied_rules(POLICIES, suppressed) == set()


# --- DRA021: consumable shares across tenants -----------------------------------------------------

def _share(namespace: str, name: str = "share", device_class: str = "gpu.nvidia.com",
           **fields: Any) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class, "allocationMode": "ExactCount",
                                          "count": 1, **fields}}
    return claim_template([request], name=name, namespace=namespace, version="v1")


CAPACITY = {"capacity": {"requests": {"memory": "20Gi"}}}


def _workload(namespace: str, template: str, tenant: str | None = None) -> dict[str, Any]:
    labels = {"tenant": tenant} if tenant else {}
    return pod({"terminationGracePeriodSeconds": 30,
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}]},
               name=f"p-{tenant or namespace}", namespace=namespace, labels=labels)


def test_shares_of_one_class_in_two_namespaces_are_an_error_even_with_dra006_suppressed() -> None:
    a = _suppress(_share("team-a", **CAPACITY), "DRA006", "replicas share on purpose")
    b = _suppress(_share("team-b", **CAPACITY), "DRA006", "embeddings share on purpose")
    found = _found([a, b], "DRA021")
    assert found == ["ResourceClaimTemplate/team-a/share spec.spec.devices.requests[0].exactly.deviceClassName",
                     "ResourceClaimTemplate/team-b/share spec.spec.devices.requests[0].exactly.deviceClassName"]
    message = next(f.message for f in audit([a, b], kubernetes_version="1.36").errors if f.rule == "DRA021")
    assert "team-a, team-b" in message and "'gpu.nvidia.com'" in message
    # One namespace sharing with itself is DRA006's decision, not DRA021's.
    assert _found([a, _share("team-a", name="other", **CAPACITY)], "DRA021") == []
    # Suppressing DRA021 in one namespace leaves the other tenant's finding.
    quiet_a = _suppress(_share("team-a", **CAPACITY), "DRA021", "we accept the risk")
    assert [f.split()[0] for f in _found([quiet_a, b], "DRA021")] == ["ResourceClaimTemplate/team-b/share"]


def test_two_tenant_labels_of_one_namespace_drawing_shares() -> None:
    template = _share("shared", **CAPACITY)
    assert _found([template, _workload("shared", "share", "a"), _workload("shared", "share", "b")], "DRA021") != []
    assert _found([template, _workload("shared", "share", "a"), _workload("shared", "share", "a")], "DRA021") == []


def test_a_shared_device_class_or_selector_is_a_share() -> None:
    shared_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu-shared"},
                    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                                  "device.allowMultipleAllocations"}}]}}
    plain = [_share("team-a", device_class="gpu-shared"), _share("team-b", device_class="gpu-shared")]
    assert len(_found([shared_class, *plain], "DRA021")) == 2
    assert _found(plain, "DRA021") == []  # the class is not in the set: nothing says it is shared
    selector = {"selectors": [{"cel": {"expression": "device.allowMultipleAllocations == true"}}]}
    assert len(_found([_share("team-a", **selector), _share("team-b", **selector)], "DRA021")) == 2


def test_what_is_not_a_cross_tenant_gpu_share() -> None:
    cpu = {"capacity": {"requests": {"cpu": "4"}}}
    assert _found([_share("team-a", device_class="dra.cpu", **cpu),
                   _share("team-b", device_class="dra.cpu", **cpu)], "DRA021") == []  # not a GPU
    assert _found([_share("team-a", **CAPACITY), _share("team-b")], "DRA021") == []  # team-b claims whole GPUs
    assert _found([_share("team-a", **CAPACITY), _share("", **CAPACITY)], "DRA021") == []  # lands where applied
    assert _found([_share("team-a", **CAPACITY), _share("team-b", device_class="mig.nvidia.com", **CAPACITY)],
                  "DRA021") == []  # different classes


def test_the_construct_passes_the_allowed_namespaces_to_the_policy() -> None:
    import cdk8s

    from dra_constructs.guardrails import GuardrailsAdmissionPolicy

    chart = cdk8s.Chart(cdk8s.Testing.app(), "c")
    policy = GuardrailsAdmissionPolicy(chart, "g", admin_access_namespaces=["dra-sanitizer"])
    names = [m["metadata"]["name"] for m in policy.manifests if m["kind"] == "ValidatingAdmissionPolicy"]
    assert "dra-guardrails-namespaces" in names
    assert denied_rules(policy.manifests, _namespace("dra-sanitizer", **{NEW: "true"})) == set()
    assert denied_rules(policy.manifests, _namespace("team-ml", **{NEW: "true"})) == {"DRA019"}
    synthesized = [d for d in cdk8s.Testing.synth(chart) if d["kind"] == "ValidatingAdmissionPolicy"]
    assert any(d["metadata"]["name"] == "dra-guardrails-namespaces" for d in synthesized)
