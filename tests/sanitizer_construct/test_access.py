"""How the agent reaches the driver: no DRA claim, the NVIDIA runtime's variables, privilege by MIG mode.

Also the two guardrail rules that look at the agent's pod: DRA002 (device selection by env)
must not fire on the construct's own DaemonSet but must keep refusing a tenant that copies its
variables, and DRA009 counts a sanitizer only where its pods can run (no claim to allocate).
"""

from __future__ import annotations

import copy
from typing import Any

import cdk8s
import pytest
import yaml
from guardrails.vap import denied_rules

from dra_constructs import set_kubernetes_version, set_mig_mode
from dra_constructs.agent.config import AgentConfig
from dra_constructs.constructs.sanitizer._agent_spec import COMPONENT_LABEL, COMPONENT_VALUE
from dra_constructs.constructs.sanitizer._checkov import PRIVILEGED_SUPPRESSIONS
from dra_constructs.constructs.sanitizer.construct import ENV_DEVICES_REASON, SanitizerDaemonSet
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import SUPPRESSIONS_ANNOTATION, audit
from dra_constructs.guardrails.policy import admission_policy_manifests

from .helpers import DIGEST, IMAGE, agent_container, build, one, pod_spec

MIG_ENV = {"NVIDIA_MIG_MONITOR_DEVICES": "all", "NVIDIA_MIG_CONFIG_DEVICES": "all"}


def _env(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in agent_container(docs)["env"]}


def _app_build(version: str, app_mig_mode: str | None = None, **kwargs: Any) -> tuple[SanitizerDaemonSet,
                                                                                      list[dict[str, Any]]]:
    """Like ``build`` but with the App's ``set_mig_mode`` (the App-level setting the construct follows)."""
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    if app_mig_mode is not None:
        set_mig_mode(app, app_mig_mode)
    chart = cdk8s.Chart(app, "gpu-sanitizer")
    sanitizer = SanitizerDaemonSet(chart, "sanitizer", image=IMAGE, image_digest=DIGEST, **kwargs)
    return sanitizer, [dict(d) for d in cdk8s.Testing.synth(chart)]


def _loaded_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    return data


@pytest.mark.parametrize("mig_mode", ["off", "static", "dynamic"])
def test_the_pod_needs_no_dra_allocation(mig_mode: str) -> None:
    _, docs = build("1.34", mig_mode=mig_mode)
    kinds = {d["kind"] for d in docs}
    assert not kinds & {"ResourceClaimTemplate", "ResourceClaim", "DeviceClass"}
    spec = pod_spec(docs)
    assert "resourceClaims" not in spec
    assert all("claims" not in c["resources"] for c in spec["containers"])
    assert spec["runtimeClassName"] == "nvidia"
    env = _env(docs)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all" and env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"


def test_runtime_class_none_leaves_the_default_runtime() -> None:
    _, docs = build("1.34", runtime_class_name=None)
    assert "runtimeClassName" not in pod_spec(docs)
    _, docs = build("1.34", runtime_class_name="nvidia-cdi")
    assert pod_spec(docs)["runtimeClassName"] == "nvidia-cdi"


@pytest.mark.parametrize(("mig_mode", "partition_reset", "privileged"), [
    ("off", "off", False),
    ("off", "mig-instance", True),
    ("static", "off", True),
    ("static", "mig-instance", True),
    ("dynamic", "off", True),
])
def test_privileged_exactly_where_the_agent_manages_mig_instances(
        mig_mode: str, partition_reset: str, privileged: bool) -> None:
    sanitizer, docs = build("1.34", mig_mode=mig_mode, config={"partition_reset": partition_reset})
    security = agent_container(docs)["securityContext"]
    assert sanitizer.access.privileged is privileged
    assert security["privileged"] is privileged
    assert security["runAsUser"] == 0 and security["readOnlyRootFilesystem"] is True
    env = _env(docs)
    annotations = one(docs, "DaemonSet")["metadata"]["annotations"]
    skipped = {v.partition("=")[0] for k, v in annotations.items() if k.startswith("checkov.io/skip")}
    if privileged:
        # The API server refuses allowPrivilegeEscalation: false with privileged; capabilities are
        # ignored for a privileged container, so none is written.
        assert "allowPrivilegeEscalation" not in security and "capabilities" not in security
        assert "appArmorProfile" not in security  # a privileged container is unconfined already
        assert "seLinuxOptions" not in security  # it runs in the runtime's privileged domain
        assert env["NVIDIA_MIG_CONFIG_DEVICES"] == "all"
        assert set(PRIVILEGED_SUPPRESSIONS) <= skipped and "CKV_K8S_39" not in skipped
        assert sanitizer.access.privileged_because
    else:
        assert security["allowPrivilegeEscalation"] is False
        # The default container profile allows ptrace reads only to its own peers: host processes'
        # /proc/<pid>/fd would be unreadable and every scan would refuse the release.
        assert security["appArmorProfile"] == {"type": "Unconfined"}
        # container_t, the SELinux default, may not ptrace-read or signal host processes either.
        assert security["seLinuxOptions"] == {"type": "spc_t"}
        assert security["capabilities"] == {"drop": ["ALL"], "add": ["KILL", "SYS_ADMIN", "SYS_PTRACE"]}
        assert "NVIDIA_MIG_CONFIG_DEVICES" not in env
        assert not set(PRIVILEGED_SUPPRESSIONS) & skipped
    assert ("NVIDIA_MIG_MONITOR_DEVICES" in env) is (mig_mode != "off")


def test_se_linux_type_is_set_replaced_or_left_out() -> None:
    _, docs = build("1.34", mig_mode="off", se_linux_type=None)
    assert "seLinuxOptions" not in agent_container(docs)["securityContext"]
    _, docs = build("1.34", mig_mode="off", se_linux_type="dra_sanitizer.process")  # a udica-made type
    assert agent_container(docs)["securityContext"]["seLinuxOptions"] == {"type": "dra_sanitizer.process"}


@pytest.mark.parametrize(("value", "problem"), [
    ("container_t", "a confined container domain"),
    ("container_init_t", "a confined container domain"),
    ("container_kvm_t", "a confined container domain"),
    ("container_engine_t", "a confined container domain"),
    ("system_u:system_r:spc_t:s0", "not an SELinux type name"),
    ("", "not an SELinux type name"),
])
def test_a_confined_or_malformed_se_linux_type_is_refused(value: str, problem: str) -> None:
    with pytest.raises(DraConstructsError, match=problem) as refused:
        build("1.34", mig_mode="off", se_linux_type=value)
    assert refused.value.field == "se_linux_type" and "spc_t" in str(refused.value)


def test_partition_reset_gpu_is_refused_by_the_construct() -> None:
    """The agent's own NVML session defeats nvidia-smi --gpu-reset (review D7): refused, with the fix."""
    with pytest.raises(DraConstructsError, match="mig-instance"):
        build("1.34", config={"partition_reset": "gpu"})


@pytest.mark.parametrize(("version", "app_mode", "kwargs", "expected"), [
    ("1.34", "dynamic", {}, "dynamic"),                       # set_mig_mode(app, "dynamic")
    ("1.36", None, {}, "dynamic"),                            # the 1.36 default: partitionable devices on
    ("1.34", None, {}, "static"),
    ("1.36", "static", {}, "static"),
    ("1.34", "dynamic", {"config": {"dynamic_mig": False}}, "static"),   # told otherwise
    ("1.34", "static", {"config": AgentConfig(dynamic_mig=True)}, "dynamic"),
    ("1.36", None, {"mig_mode": "off"}, "off"),
])
def test_the_daemonset_follows_the_apps_mig_mode_unless_told_otherwise(
        version: str, app_mode: str | None, kwargs: dict[str, Any], expected: str) -> None:
    sanitizer, docs = _app_build(version, app_mode, **kwargs)
    assert sanitizer.mig_mode == expected
    assert _loaded_config(docs)["dynamic_mig"] is (expected == "dynamic")
    assert agent_container(docs)["securityContext"]["privileged"] is (expected != "off")


# --- DRA002: the agent's own env is no tenant's device selection ----------------------------------

def _tenant_deployment(env: list[dict[str, Any]], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "copycat", "namespace": "team-a", **({"annotations": annotations} if annotations else {})},
        "spec": {"selector": {"matchLabels": {"app": "copycat"}}, "template": {
            "metadata": {"labels": {"app": "copycat"}},
            "spec": {"containers": [{"name": "main", "image": "example.com/app:1", "env": env}]}}},
    }


def _dra002(docs: list[dict[str, Any]]) -> list[str]:
    return [f.object for f in audit(docs, kubernetes_version="1.34").findings if f.rule == "DRA002"]


def test_dra002_is_suppressed_on_the_constructs_daemonset_with_its_reason() -> None:
    _, docs = build("1.34")
    result = audit(docs, kubernetes_version="1.34")
    assert [f for f in result.findings if f.severity.value == "error"] == []
    assert [(s.finding.rule, s.finding.kind, s.reason) for s in result.suppressed] == [
        ("DRA002", "DaemonSet", ENV_DEVICES_REASON)]


def test_a_tenant_copying_the_agents_env_is_still_refused() -> None:
    _, docs = build("1.34")
    env = agent_container(docs)["env"]
    assert _dra002([_tenant_deployment(env)]) == ["Deployment/team-a/copycat"]
    # Copying the whole DaemonSet but not its suppression: refused as well.
    daemon_set = copy.deepcopy(one(docs, "DaemonSet"))
    del daemon_set["metadata"]["annotations"][SUPPRESSIONS_ANNOTATION]
    assert _dra002([daemon_set]) == [f"DaemonSet/{daemon_set['metadata']['namespace']}/dra-sanitizer"]
    # The component label alone does not exempt anything.
    labelled = _tenant_deployment(env)
    labelled["spec"]["template"]["metadata"]["labels"][COMPONENT_LABEL] = COMPONENT_VALUE
    assert _dra002([labelled]) == ["Deployment/team-a/copycat"]


def test_the_admission_policy_admits_the_daemonset_and_refuses_a_copy_of_its_env() -> None:
    """The cluster-side guardrail (ValidatingAdmissionPolicy, evaluated with a real CEL engine)."""
    policies = admission_policy_manifests()
    _, docs = build("1.34")
    daemon_set = one(docs, "DaemonSet")
    assert denied_rules(policies, daemon_set) == set()
    unsuppressed = copy.deepcopy(daemon_set)
    del unsuppressed["metadata"]["annotations"][SUPPRESSIONS_ANNOTATION]
    assert denied_rules(policies, unsuppressed) == {"DRA002"}
    assert denied_rules(policies, _tenant_deployment(agent_container(docs)["env"])) == {"DRA002"}


# --- DRA009: a sanitizer counts only where its pods can run -------------------------------------

def _tenant_pods() -> list[dict[str, Any]]:
    docs = []
    for team in ("team-a", "team-b"):
        docs.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": team},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}},
        })
        docs.append({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": team},
            "spec": {"terminationGracePeriodSeconds": 30, "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                "containers": [{"name": "main", "image": "example.com/train:1",
                                "resources": {"claims": [{"name": "gpu"}]}}]},
        })
    return docs


def _dra009(docs: list[dict[str, Any]]) -> list[str]:
    return [f.message for f in audit(docs, kubernetes_version="1.34").findings if f.rule == "DRA009"]


def test_dra009_counts_the_claimless_daemonset() -> None:
    _, docs = build("1.34")
    assert _dra009(_tenant_pods()) != []
    assert _dra009([*_tenant_pods(), *docs]) == []


def test_dra009_does_not_count_a_sanitizer_whose_pods_wait_for_a_claim() -> None:
    """The pre-0.2 shape: an admin claim with allocationMode All, unallocatable on dense nodes."""
    _, docs = build("1.34")
    daemon_set = one(docs, "DaemonSet")
    spec = daemon_set["spec"]["template"]["spec"]
    spec["resourceClaims"] = [{"name": "node-gpus", "resourceClaimTemplateName": "dra-sanitizer"}]
    spec["containers"][0]["resources"]["claims"] = [{"name": "node-gpus"}]
    messages = _dra009([*_tenant_pods(), *docs])
    assert messages and all("dra-sanitizer/dra-sanitizer does not cover every GPU node" in m for m in messages)
    assert "more than 32 devices" in messages[0]
