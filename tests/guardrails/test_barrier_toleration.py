"""DRA017: a claim tolerating the sanitizer's own device taint is refused at synth, in audit and at admission."""

from __future__ import annotations

from typing import Any

import pytest

from dra_constructs.guardrails import audit
from dra_constructs.guardrails.policy import admission_policy_manifests
from dra_constructs.guardrails.rules.barrier_toleration import SANITIZER_TAINT_KEY

from .helpers import claim_template, mig_request
from .vap import denied_rules

POLICIES = admission_policy_manifests()
BARRIER = {"key": SANITIZER_TAINT_KEY, "operator": "Exists"}


def test_the_key_is_the_agents() -> None:
    from dra_constructs.agent.config import DEFAULT_TAINT_KEY, AgentConfig

    assert SANITIZER_TAINT_KEY == DEFAULT_TAINT_KEY == AgentConfig.model_fields["taint_key"].default


def _v1(tolerations: list[dict[str, Any]], **exactly: Any) -> dict[str, Any]:
    fields = {k: v for k, v in mig_request().items() if k != "name"}
    return claim_template([{"name": "gpu", "exactly": {**fields, "tolerations": tolerations, **exactly}}],
                          version="v1")


def _first_available(tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    sub = {k: v for k, v in mig_request().items() if k != "name"}
    return claim_template([{"name": "gpu", "firstAvailable": [{"name": "big", **sub},
                                                              {"name": "small", **sub, "tolerations": tolerations}]}],
                          version="v1")


CASES = [
    ("v1beta1 flat request", claim_template([mig_request(tolerations=[BARRIER])], version="v1beta1"), "spec.spec."
     "devices.requests[0].tolerations[0]"),
    ("v1 exactly, Equal on the key",
     _v1([{"key": SANITIZER_TAINT_KEY, "value": "quarantined", "effect": "NoSchedule"}]),
     "spec.spec.devices.requests[0].exactly.tolerations[0]"),
    ("key-less Exists tolerates every taint", _v1([{"key": "example.com/other"}, {"operator": "Exists"}]),
     "spec.spec.devices.requests[0].exactly.tolerations[1]"),
    ("firstAvailable subrequest", _first_available([BARRIER]),
     "spec.spec.devices.requests[0].firstAvailable[1].tolerations[0]"),
]


@pytest.mark.parametrize(("case", "obj", "path"), CASES, ids=[c[0] for c in CASES])
def test_a_toleration_of_the_barrier_is_an_error_in_audit_and_at_admission(case: str, obj: dict[str, Any],
                                                                            path: str) -> None:
    result = audit([obj], kubernetes_version="1.34")
    hits = [f for f in result.errors if f.rule == "DRA017"]
    assert [f.path for f in hits] == [path], case
    assert "quarantined" in hits[0].message and SANITIZER_TAINT_KEY in hits[0].fix
    assert denied_rules(POLICIES, obj) == {"DRA017"}, case
    claim = {**obj, "kind": "ResourceClaim", "spec": obj["spec"]["spec"]}
    assert denied_rules(POLICIES, claim) == {"DRA017"}


def test_other_keys_and_admin_access_are_allowed() -> None:
    other = _v1([{"key": "gpu.nvidia.com/xid", "operator": "Exists"}, {"key": "example.com/maintenance"}])
    admin = _v1([BARRIER], adminAccess=True)  # the API server admits adminAccess only in admin namespaces
    for obj in (other, admin):
        assert "DRA017" not in {f.rule for f in audit([obj], kubernetes_version="1.34").findings}
        assert "DRA017" not in denied_rules(POLICIES, obj)


def test_suppression_is_honoured_by_the_policy() -> None:
    obj = _v1([BARRIER])
    obj["metadata"]["annotations"] = {
        "guardrails.dra-constructs.io/suppressions": '[{"rule": "DRA017", "reason": "break-glass debugging pod"}]'}
    assert denied_rules(POLICIES, obj) == set()
    result = audit([obj], kubernetes_version="1.34")
    assert [s.finding.rule for s in result.suppressed] == ["DRA017"]


def test_synth_refuses_a_template_tolerating_the_barrier() -> None:
    import cdk8s

    from dra_constructs import DeviceToleration, GpuClaimTemplate, GpuModel, MigRequest, set_kubernetes_version

    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.34")
    chart = cdk8s.Chart(app, "c", namespace="team-evil")
    GpuClaimTemplate(chart, "t", requests=[MigRequest(name="mig", gpu=GpuModel.H100_80GB, profile="1g.10gb",
                                                      tolerations=(DeviceToleration(key=SANITIZER_TAINT_KEY,
                                                                                    operator="Exists"),))])
    with pytest.raises(RuntimeError, match=r"\[DRA017\] ResourceClaimTemplate/team-evil/"):
        cdk8s.Testing.synth(chart)
