from __future__ import annotations

import pytest

from dra_constructs import DraConstructsError, Target


@pytest.mark.parametrize(
    ("version", "api_version", "wrapped"),
    [
        ("1.32", "resource.k8s.io/v1beta1", False),
        ("v1.33", "resource.k8s.io/v1beta2", True),
        ("1.34", "resource.k8s.io/v1", True),
        ("1.37.1", "resource.k8s.io/v1", True),
    ],
)
def test_resource_api_version_follows_target(version: str, api_version: str, wrapped: bool) -> None:
    target = Target.parse(version)
    assert target.resource_api_version == api_version
    assert target.wraps_requests_in_exactly is wrapped


def test_default_is_1_32() -> None:
    assert Target.parse(None) == Target(minor=32)
    assert str(Target.parse(None)) == "1.32"


@pytest.mark.parametrize("bad", ["1.31", "2.0", "latest", "", "1.32.x", "1.99"])
def test_bad_versions_raise_library_error(bad: str) -> None:
    with pytest.raises(DraConstructsError) as info:
        Target.parse(bad, "app")
    assert "kubernetesVersion" in str(info.value) and "Fix:" in str(info.value)


def test_admin_access_labels_cover_the_rename() -> None:
    assert Target.parse("1.33").admin_access_namespace_labels == (
        "resource.k8s.io/admin-access", "resource.kubernetes.io/admin-access")
    assert Target.parse("1.34").admin_access_namespace_labels == (
        "resource.k8s.io/admin-access", "resource.kubernetes.io/admin-access")
    assert Target.parse("1.35").admin_access_namespace_labels == ("resource.kubernetes.io/admin-access",)


def test_device_taint_rules_by_version() -> None:
    assert Target.parse("1.32").device_taint_rule_api_version is None
    assert Target.parse("1.33").device_taint_rule_api_version == "resource.k8s.io/v1alpha3"
    assert Target.parse("1.34").device_taint_rule_has_cel_selectors
    assert not Target.parse("1.35").device_taint_rule_has_cel_selectors
    assert Target.parse("1.37").device_taint_rule_api_version == "resource.k8s.io/v1"
    assert "None" in Target.parse("1.35").device_taint_effects
    assert "None" not in Target.parse("1.34").device_taint_effects


def test_cost_estimator_bug_only_before_1_32_3() -> None:
    assert Target.parse("1.32.2").cel_cost_estimator_bug
    assert not Target.parse("1.32.3").cel_cost_estimator_bug
    assert not Target.parse("1.32").cel_cost_estimator_bug
    assert not Target.parse("1.34").cel_has_allow_multiple_allocations  # DRAConsumableCapacity alpha
    assert Target.parse("1.36").cel_has_allow_multiple_allocations  # beta, on by default
