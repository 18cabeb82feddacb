"""SanitizerDaemonSet: the objects, their privileges, the image, the configuration and its errors."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from dra_constructs import DraConstructsError
from dra_constructs.agent import zipapp as zipapp_module
from dra_constructs.agent.config import AgentConfig, load_config
from dra_constructs.constructs.sanitizer._agent_spec import agent_rules
from dra_constructs.constructs.sanitizer.construct import RUNTIME_HASH_ANNOTATION, UNPINNED_IMAGE_ANNOTATION
from dra_constructs.guardrails import SANITIZER_LABEL
from dra_constructs.target import Target

from .helpers import DIGEST, IMAGE, VERSIONS, agent_container, build, one, pod_spec

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}


@pytest.fixture(scope="module")
def docs_by_version() -> dict[str, list[dict[str, Any]]]:
    return {v: build(v)[1] for v in VERSIONS}


def test_emits_every_object_the_agent_needs(docs_by_version: dict[str, list[dict[str, Any]]]) -> None:
    kinds = sorted(d["kind"] for d in docs_by_version["1.34"])
    assert kinds == sorted([
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "ConfigMap", "NetworkPolicy", "DaemonSet",
    ])


def test_daemonset_carries_the_guardrails_sanitizer_label(docs_by_version: dict[str, list[dict[str, Any]]]) -> None:
    key, value = SANITIZER_LABEL
    for docs in docs_by_version.values():
        daemon_set = one(docs, "DaemonSet")
        assert daemon_set["metadata"]["labels"][key] == value
        assert daemon_set["spec"]["template"]["metadata"]["labels"][key] == value


@pytest.mark.parametrize("version", [*VERSIONS, "1.35"])
def test_namespace_admits_privileged_pods_and_needs_no_admin_access_label(version: str) -> None:
    _, docs = build(version)
    labels = one(docs, "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert not [k for k in labels if k.endswith("/admin-access")]  # no admin claim any more


def test_rbac_is_exactly_the_agents_calls(docs_by_version: dict[str, list[dict[str, Any]]]) -> None:
    for version, docs in docs_by_version.items():
        rules = one(docs, "ClusterRole")["rules"]
        granted = {(g, r, tuple(rule["verbs"])) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]}
        expected = {(r.api_group, r.resource, r.verbs) for r in agent_rules(Target.parse(version))}
        assert granted == expected
        role = one(docs, "Role")
        assert role["rules"] == [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
        for rule in [*rules, *role["rules"]]:
            assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
            assert "secrets" not in rule["resources"]
            assert not rule.get("resourceNames")
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
        resources = {r for rule in rules for r in rule["resources"]}
        assert ("devicetaintrules" in resources) == (version != "1.32")
        binding = one(docs, "ClusterRoleBinding")
        assert binding["roleRef"]["name"] == one(docs, "ClusterRole")["metadata"]["name"]
        assert binding["subjects"] == [{"apiGroup": "", "kind": "ServiceAccount", "name": "dra-sanitizer",
                                        "namespace": "dra-sanitizer"}]
        assert one(docs, "RoleBinding")["subjects"] == binding["subjects"]


def test_pod_runs_with_host_pid_and_only_the_capabilities_it_needs() -> None:
    _, docs = build("1.34", mig_mode="off")  # whole GPUs: the least-privilege pod
    spec = pod_spec(docs)
    assert spec["hostPID"] is True
    assert spec.get("hostNetwork") is None and spec.get("hostIPC") is None
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["serviceAccountName"] == "dra-sanitizer" and spec["automountServiceAccountToken"] is True
    security = agent_container(docs)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["KILL", "SYS_ADMIN", "SYS_PTRACE"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}


def test_probes_requests_limits_and_writable_paths(docs_by_version: dict[str, list[dict[str, Any]]]) -> None:
    container = agent_container(docs_by_version["1.34"])
    assert container["ports"] == [{"name": "metrics", "containerPort": 9402, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert set(container["resources"]["requests"]) == {"cpu", "memory"}
    assert set(container["resources"]["limits"]) == {"cpu", "memory"}
    assert "claims" not in container["resources"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert set(mounts) == {"/opt/dra-sanitizer", "/var/lib/dra-sanitizer", "/var/log/dra-sanitizer", "/tmp"}
    assert mounts["/opt/dra-sanitizer"]["readOnly"] is True
    assert container["command"][-2:] == ["--node", "$(NODE_NAME)"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}


def test_evidence_inside_the_state_dir_is_one_mount() -> None:
    _, docs = build(config=AgentConfig(state_dir="/var/lib/gpu-barrier",
                                       evidence_file="/var/lib/gpu-barrier/evidence/records.jsonl"))
    spec = pod_spec(docs)
    assert [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v] == ["/var/lib/gpu-barrier"]


def test_pinned_image_and_unpinned_image() -> None:
    _, pinned = build()
    container = agent_container(pinned)
    assert container["image"] == f"{IMAGE}@{DIGEST}"
    assert container["imagePullPolicy"] == "IfNotPresent"
    _, inline = build(image=f"{IMAGE}@{DIGEST}", image_digest=None)
    assert agent_container(inline)["image"] == f"{IMAGE}@{DIGEST}"
    _, unpinned = build(image_digest=None, unpinned_image_reason=" kind test cluster, local registry ")
    assert agent_container(unpinned)["image"] == IMAGE
    assert agent_container(unpinned)["imagePullPolicy"] == "Always"
    assert one(unpinned, "DaemonSet")["metadata"]["annotations"][UNPINNED_IMAGE_ANNOTATION] == (
        "kind test cluster, local registry")
    assert UNPINNED_IMAGE_ANNOTATION not in one(pinned, "DaemonSet")["metadata"]["annotations"]


@pytest.mark.parametrize("image", [f"{IMAGE}", "registry.example.com/dra-sanitizer-base:latest",
                                   "registry.example.com/dra-sanitizer-base"])
def test_an_image_without_digest_is_refused_without_a_reason(image: str) -> None:
    for reason in (None, "", "  "):
        with pytest.raises(DraConstructsError) as error:
            build(image=image, image_digest=None, unpinned_image_reason=reason)
        assert error.value.field == "image_digest" and "not pinned" in error.value.problem
        assert "unpinned_image_reason" in error.value.fix and "RepoDigests" in error.value.fix


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"image_digest": "sha256:abc"}, "image_digest"),
    ({"image_digest": "latest"}, "image_digest"),
    ({"image": f"{IMAGE}@{DIGEST}"}, "image_digest"),  # a digest twice
    ({"image": ""}, "image"),
    ({"image": "a b"}, "image"),
    ({"name": "Not_A_Name"}, "name"),
    ({"namespace": "kube.system"}, "namespace"),
    ({"limits": {"cpu": "1"}}, "limits['memory']"),
    ({"requests": {"cpu": "lots", "memory": "1Gi"}}, "requests['cpu']"),
    ({"termination_grace_period_seconds": 0}, "termination_grace_period_seconds"),
    ({"api_server_ports": [0]}, "api_server_ports"),
    ({"kubernetes_version": "1.31"}, "kubernetesVersion"),
    ({"unpinned_image_reason": "pinned anyway"}, "unpinned_image_reason"),
    ({"mig_mode": "mixed"}, "mig_mode"),
    ({"mig_mode": "dynamic", "kubernetes_version": "1.32"}, "mig_mode"),  # no partitionable devices on 1.32
    ({"mig_mode": "static", "config": {"dynamic_mig": True}}, "config.dynamic_mig"),
    ({"runtime_class_name": "Not A Class"}, "runtime_class_name"),
])
def test_bad_construct_input_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(DraConstructsError) as error:
        build(**kwargs)
    assert error.value.field == field
    assert "Fix:" in str(error.value)


@pytest.mark.parametrize(("config", "field"), [
    ({"node_name": "node-1"}, "config.node_name"),
    ({"backend": "simulated"}, "config.backend"),
    ({"kube": {"mode": "disabled"}}, "config.kube.mode"),
    ({"kube": {"event_namespace": "default"}}, "config.kube.event_namespace"),
    ({"kube": {"kubernetes_version": "1.33"}}, "config.kube.kubernetes_version"),
    ({"metrics_port": 0}, "config.metrics_port"),
    ({"metrics_address": "127.0.0.1"}, "config.metrics_address"),
    ({"state_dir": "state"}, "config.state_dir"),
    ({"evidence_file": "/evidence.jsonl"}, "config.evidence_file"),
    ({"coverage_threshold": 1.5}, "config.coverage_threshold"),
    ({"grace_period_s": 100, "drain_timeout_s": 10}, "config."),
    ({"grace_periode_s": 10}, "config.grace_periode_s"),
])
def test_bad_agent_config_names_the_field(config: dict[str, Any], field: str) -> None:
    with pytest.raises(DraConstructsError) as error:
        build(config=config)
    assert error.value.field.startswith(field)


def test_config_is_rendered_for_the_agent_and_validates_with_its_loader(tmp_path: Any) -> None:
    config = AgentConfig(grace_period_s=45, drain_timeout_s=90, coverage_threshold=0.995,
                         quarantine_policy="taint-only", taint_key="example.com/barrier",
                         taint_effect="NoExecute", state_dir="/var/lib/barrier",
                         evidence_file="/var/log/barrier/evidence.jsonl", metrics_port=9500)
    sanitizer, docs = build("1.33", config=config, namespace="gpu-barrier")
    text = one(docs, "ConfigMap")["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    loaded = load_config(path)
    assert loaded == sanitizer.agent_config
    assert loaded.kube.event_namespace == "gpu-barrier" and loaded.kube.kubernetes_version == "1.33"
    assert loaded.kube.mode == "in-cluster" and loaded.node_name == ""
    for field in ("grace_period_s", "drain_timeout_s", "coverage_threshold", "quarantine_policy", "taint_key",
                  "taint_effect", "state_dir", "evidence_file", "metrics_port"):
        assert getattr(loaded, field) == getattr(config, field), field
    assert "simulated" not in yaml.safe_load(text)
    container = agent_container(docs)
    assert container["ports"][0]["containerPort"] == 9500
    assert {"/var/lib/barrier", "/var/log/barrier"} <= {m["mountPath"] for m in container["volumeMounts"]}


def test_runtime_hash_annotation_rolls_the_daemonset(monkeypatch: pytest.MonkeyPatch) -> None:
    _, before = build()
    real = zipapp_module.build_zipapp()
    monkeypatch.setattr(zipapp_module, "build_zipapp", lambda: real + b"\n# one more byte of runtime")
    _, after = build()
    annotations = [one(d, "DaemonSet")["spec"]["template"]["metadata"]["annotations"] for d in (before, after)]
    assert annotations[0][RUNTIME_HASH_ANNOTATION] != annotations[1][RUNTIME_HASH_ANNOTATION]
    config_key = "sanitizer.dra-constructs.io/config-sha256"
    assert annotations[0][config_key] == annotations[1][config_key]
    names = [one(d, "ConfigMap")["metadata"]["name"] for d in (before, after)]
    assert names[0] != names[1]
    assert [pod_spec(d)["volumes"][0]["configMap"]["name"] for d in (before, after)] == names


def test_config_change_changes_only_the_config_hash() -> None:
    _, a = build()
    _, b = build(config={"coverage_threshold": 0.98})
    ann = [one(d, "DaemonSet")["spec"]["template"]["metadata"]["annotations"] for d in (a, b)]
    assert ann[0][RUNTIME_HASH_ANNOTATION] == ann[1][RUNTIME_HASH_ANNOTATION]
    assert ann[0]["sanitizer.dra-constructs.io/config-sha256"] != ann[1]["sanitizer.dra-constructs.io/config-sha256"]


def test_same_input_same_output() -> None:
    assert yaml.safe_dump_all(build()[1]) == yaml.safe_dump_all(build()[1])


def test_in_a_namespaced_chart_cluster_objects_stay_cluster_scoped() -> None:
    _, docs = build(chart_namespace="user-default")
    for doc in docs:
        if doc["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in doc["metadata"], doc["kind"]
        else:
            assert doc["metadata"]["namespace"] == "dra-sanitizer", doc["kind"]


def test_existing_namespace_and_no_network_policy() -> None:
    _, docs = build(create_namespace=False, network_policy=False, namespace="kube-system")
    kinds = {d["kind"] for d in docs}
    assert "Namespace" not in kinds and "NetworkPolicy" not in kinds
    assert one(docs, "DaemonSet")["metadata"]["namespace"] == "kube-system"


def test_network_policy_allows_metrics_in_and_the_api_server_out() -> None:
    _, docs = build(api_server_ports=[8443])
    policy = one(docs, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Egress", "Ingress"]
    assert policy["podSelector"]["matchLabels"] == one(docs, "DaemonSet")["spec"]["selector"]["matchLabels"]
    assert {p["port"] for rule in policy["egress"] for p in rule["ports"]} == {8443}
    assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} == {9402}


def test_user_labels_cannot_override_the_selector_or_the_component_label() -> None:
    _, docs = build(labels={"team": "platform", "app.kubernetes.io/name": "other", "dra-constructs.io/component": "x"})
    daemon_set = one(docs, "DaemonSet")
    labels = daemon_set["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "platform" and labels[SANITIZER_LABEL[0]] == SANITIZER_LABEL[1]
    assert daemon_set["spec"]["selector"]["matchLabels"].items() <= labels.items()
