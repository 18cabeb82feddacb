"""The 1.36/1.37 gate facts ``Target`` knows (issue 24 item 8), and that the older tables agree with them."""

from __future__ import annotations

import pytest

from dra_constructs.errors import DraConstructsError
from dra_constructs.target import API_VERSIONS, DRA_FIELDS, FEATURE_GATES, SUPPORTED_MINORS, Target


def test_device_taint_rule_is_served_by_default_only_from_1_37() -> None:
    # dra-api.md 1.2: DRADeviceTaintRules 1.35 alpha -> 1.36 beta (off) -> 1.37 GA (on).
    assert Target.parse("1.36").device_taint_rule_api_version == "resource.k8s.io/v1beta2"
    assert Target.parse("1.36").gate_stage("DRADeviceTaintRules") == "beta"
    assert not Target.parse("1.36").gate_on_by_default("DRADeviceTaintRules")
    assert [m for m in SUPPORTED_MINORS if Target(m).device_taint_rules_served_by_default] == [37]
    assert Target.parse("1.37").device_taint_rule_api_version == "resource.k8s.io/v1"
    assert Target.parse("1.36").gate("DRADeviceTaintRules").describe(36) == \
        "DRADeviceTaintRules: beta, off by default in 1.36"


def test_extended_resources_and_claim_device_status_are_ga_at_1_37() -> None:
    assert [m for m in SUPPORTED_MINORS if Target(m).dra_extended_resources_ga] == [37]
    assert [m for m in SUPPORTED_MINORS if Target(m).claim_device_status_ga] == [37]
    assert Target.parse("1.36").gate_stage("DRAExtendedResource") == "beta"
    assert Target.parse("1.36").dra_extended_resources_on_by_default
    assert Target.parse("1.33").gate_stage("DRAResourceClaimDeviceStatus") == "beta"
    assert Target.parse("1.32").gate_stage("DRADeviceTaintRules") is None


@pytest.mark.parametrize("minor", list(SUPPORTED_MINORS))
def test_default_feature_gates_agree_with_the_gate_table(minor: int) -> None:
    target = Target(minor)
    for gate, on in target.default_feature_gates.items():
        assert FEATURE_GATES[gate].on_by_default(minor) is on, (gate, minor)


def test_field_facts_agree_with_the_gate_table() -> None:
    for fact in DRA_FIELDS.values():
        if fact.feature_gate is None or fact.removed is not None:
            continue
        first_on = next((m for m in SUPPORTED_MINORS if FEATURE_GATES[fact.feature_gate].on_by_default(m)), None)
        assert fact.default_on == first_on, fact.field


def test_an_unknown_gate_is_refused_with_the_known_ones() -> None:
    with pytest.raises(DraConstructsError, match="DRADeviceTaintRules"):
        Target.parse("1.36").gate("DRADeviceTaint")


def _kube_features(version: str) -> str:
    """``pkg/features/kube_features.go`` of ``version`` from the Go module cache the control plane was built in."""
    import contextlib
    import os
    import subprocess
    from pathlib import Path

    roots = [os.environ.get("GOMODCACHE", ""), str(Path.home() / "go" / "pkg" / "mod")]
    with contextlib.suppress(OSError, subprocess.SubprocessError):  # no Go: the default cache only
        roots.insert(0, subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True,
                                       timeout=30).stdout.strip())
    for root in filter(None, roots):
        path = Path(root) / "k8s.io" / f"kubernetes@{version}" / "pkg" / "features" / "kube_features.go"
        if path.is_file():
            return path.read_text()
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true needs k8s.io/kubernetes@{version} in the Go module cache (make controlplane)")
    pytest.skip(f"k8s.io/kubernetes@{version} is not in the Go module cache (make controlplane fetches it)")


def test_the_gate_table_is_kube_features_go_of_1_37() -> None:
    """Each gate's alpha / beta (and its default) / GA minor as kubernetes v1.37.2 declares them."""
    import re

    source = _kube_features("v1.37.2")
    for name, fact in FEATURE_GATES.items():
        block = re.search(rf"\n\t{name}: {{\n(.*?)\n\t}},", source, re.S)
        assert block, name
        stages: dict[str, tuple[int, bool]] = {}
        for minor, default, stage in re.findall(
                r'version\.MustParse\("1\.(\d+)"\), Default: (true|false), PreRelease: featuregate\.(\w+)',
                block.group(1)):
            stages.setdefault(stage, (int(minor), default == "true"))
        assert fact.alpha == stages.get("Alpha", (None, False))[0], name
        assert fact.beta == stages.get("Beta", (None, False))[0], name
        assert fact.ga == stages.get("GA", (None, False))[0], name
        if fact.beta is not None:
            assert fact.beta_on is stages["Beta"][1], name


def test_claim_status_writers_need_the_driver_subresource_from_1_36() -> None:
    assert [m for m in SUPPORTED_MINORS if Target(m).claim_status_authorization_is_granular] == [36, 37]
    old = Target.parse("1.35").claim_status_writer_rules("gpu.nvidia.com")
    assert [r.resource for r in old] == ["resourceclaims/status"]
    new = Target.parse("1.36").claim_status_writer_rules("gpu.nvidia.com", allocation=True)
    assert [r.manifest() for r in new[1:]] == [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
         "verbs": ["associated-node:patch", "associated-node:update"], "resourceNames": ["gpu.nvidia.com"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/binding"], "verbs": ["patch", "update"]}]
    remote = Target.parse("1.37").claim_status_writer_rules("gpu.nvidia.com", node_local=False)
    assert remote[1].verbs == ("arbitrary-node:patch", "arbitrary-node:update")


def test_only_v1_is_served_by_default_and_device_taint_rule_only_from_1_37() -> None:
    served = {m: sorted(f"{f.api_version} {k}" for f in API_VERSIONS for k in f.kinds
                        if Target(m).served_by_default(f.api_version, k)) for m in SUPPORTED_MINORS}
    assert served[32] == served[33] == []
    assert served[34] == served[36] == [f"resource.k8s.io/v1 {k}" for k in
                                        ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")]
    assert served[37] == sorted([*served[36], "resource.k8s.io/v1 DeviceTaintRule"])
    for minor in SUPPORTED_MINORS:
        target = Target(minor)
        assert target.device_taint_rules_served_by_default == any(
            target.served_by_default(f.api_version, "DeviceTaintRule") for f in API_VERSIONS)
