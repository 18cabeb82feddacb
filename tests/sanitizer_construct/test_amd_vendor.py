"""``SanitizerDaemonSet(vendor="amd")``: the agent on AMD GPU nodes (backend ``amd``, docs/amd.md)."""

from __future__ import annotations

import pytest
import yaml

from dra_constructs.constructs.sanitizer._agent_spec import AMD_NODE_SELECTOR
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import audit

from .helpers import agent_container, build, one, pod_spec


def test_the_amd_pod_is_privileged_for_the_device_nodes_and_sysfs() -> None:
    sanitizer, docs = build(vendor="amd")
    assert sanitizer.agent_config.backend == "amd" and sanitizer.mig_mode == "off"
    spec = pod_spec(docs)
    assert spec["nodeSelector"] == dict(AMD_NODE_SELECTOR)
    assert spec["tolerations"] == [{"key": "amd.com/gpu", "operator": "Exists"}]
    assert "runtimeClassName" not in spec and spec["hostPID"] is True
    container = agent_container(docs)
    assert container["securityContext"]["privileged"] is True
    assert not [e for e in container["env"] if e["name"].startswith("NVIDIA_")]
    reasons = " ".join(sanitizer.access.privileged_because)
    assert "/dev/kfd" in reasons and "renderD" in reasons and "sysfs" in reasons
    daemon_set = one(docs, "DaemonSet")
    assert daemon_set["spec"]["template"]["metadata"]["labels"]["dra-constructs.io/sanitizer-vendor"] == "amd"
    skips = [v for k, v in daemon_set["metadata"]["annotations"].items() if k.startswith("checkov.io/skip")]
    assert any(s.startswith("CKV_K8S_16=") and "AMD" in s and "MIG" not in s for s in skips)
    config = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    assert config["backend"] == "amd" and config["amd"]["sysfs_root"] == "/sys"


def test_the_nvidia_pod_is_unchanged() -> None:
    sanitizer, docs = build()
    assert sanitizer.agent_config.backend == "nvml"
    assert "dra-constructs.io/sanitizer-vendor" not in one(docs, "DaemonSet")["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"mig_mode": "static"}, "mig_mode"),
    ({"runtime_class_name": "rocm"}, "runtime_class_name"),
    ({"config": {"backend": "nvml"}}, "config.backend"),
    ({"config": {"partition_reset": "mig-instance"}}, "config."),  # the model's own check: XGMI hive reset
    ({"vendor": "intel"}, "vendor"),
])
def test_amd_misconfigurations_are_refused(kwargs: dict[str, object], field: str) -> None:
    kwargs.setdefault("vendor", "amd")
    with pytest.raises(DraConstructsError) as caught:
        build(**kwargs)
    assert caught.value.field == field
    if field == "config.":
        assert "XGMI hive" in str(caught.value)


def test_an_amd_sanitizer_counts_for_dra009() -> None:
    _, docs = build(vendor="amd")
    amd = "device.attributes['gpu.amd.com'].type == 'amdgpu-partition'"
    tenants = []
    for ns in ("team-a", "team-b"):
        tenants += [
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": "p", "namespace": ns},
             "spec": {"spec": {"devices": {"requests": [{"name": "p", "exactly": {
                 "deviceClassName": "gpu.amd.com", "selectors": [{"cel": {"expression": amd}}]}}]}}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": ns},
             "spec": {"terminationGracePeriodSeconds": 60, "resourceClaims": [
                 {"name": "p", "resourceClaimTemplateName": "p"}],
                 "containers": [{"name": "c", "image": "rocm/pytorch@sha256:" + "0" * 64,
                                 "resources": {"claims": [{"name": "p"}]}}]}},
        ]
    assert "DRA009" not in {f.rule for f in audit([*docs, *tenants], kubernetes_version="1.34").findings}
    _, nvidia = build()
    assert "DRA009" in {f.rule for f in audit([*nvidia, *tenants], kubernetes_version="1.34").findings}


def test_an_agent_config_object_gets_the_amd_defaults() -> None:
    from dra_constructs.agent.config import AgentConfig

    sanitizer, _ = build(vendor="amd", config=AgentConfig(grace_period_s=60, drain_timeout_s=120))
    config = sanitizer.agent_config
    assert config.backend == "amd" and config.grace_period_s == 60
    assert config.selftest_at_start is False  # no residue canary on AMD (the HIP worker writes no pattern)
