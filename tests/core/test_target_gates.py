"""The 1.36/1.37 gate facts ``Target`` knows (issue 24 item 8), and that the older tables agree with them."""

from __future__ import annotations

import pytest

from dra_constructs.errors import DraConstructsError
from dra_constructs.target import DRA_FIELDS, FEATURE_GATES, SUPPORTED_MINORS, Target


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
