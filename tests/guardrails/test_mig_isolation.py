"""DRA022: MIG isolation tolerations, at synth, in audit, and in the admission policies (generic and the tenant's)."""

from __future__ import annotations

from typing import Any

import pytest

from dra_constructs.guardrails import audit
from dra_constructs.guardrails.policy import admission_policy_manifests
from dra_constructs.isolation import ISOLATION_LABEL, ISOLATION_TAINT_KEY, own_toleration, shared_toleration
from dra_constructs.tenants.admission import device_class_policy_manifests

from .helpers import claim_template, mig_request
from .vap import denied_rules, evaluate

POLICIES = admission_policy_manifests()
TENANT_POLICY = device_class_policy_manifests("p", "team-a", ["mig.nvidia.com"], {}, exclusive_gpu=True)[0]


def _ns(name: str, level: str | None) -> dict[str, Any]:
    labels = {"dra-constructs.io/tenant": name, **({ISOLATION_LABEL: level} if level else {})}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def _v1(namespace: str, tolerations: list[dict[str, Any]] | None, **exactly: Any) -> dict[str, Any]:
    fields = {k: v for k, v in mig_request().items() if k != "name"}
    if tolerations is not None:
        fields["tolerations"] = tolerations
    return claim_template([{"name": "gpu", "exactly": {**fields, **exactly}}], namespace=namespace, version="v1")


def _first(namespace: str, tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    sub = {k: v for k, v in mig_request().items() if k != "name"}
    return claim_template([{"name": "gpu", "firstAvailable": [{"name": "big", **sub, "tolerations": tolerations},
                                                              {"name": "small", **sub}]}],
                          namespace=namespace, version="v1")


def _dra022(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    result = audit(objects, kubernetes_version="1.34")
    return [(f.path, f.message) for f in result.errors if f.rule == "DRA022"]


BAD = [
    ("another tenant's value", [own_toleration("team-a")]),
    ("the key with Exists", [{"key": ISOLATION_TAINT_KEY, "operator": "Exists"}]),
    ("Conflict", [{"key": ISOLATION_TAINT_KEY, "value": "Conflict"}]),
]


@pytest.mark.parametrize(("case", "tolerations"), BAD, ids=[c[0] for c in BAD])
def test_tolerating_another_tenant_s_gpus_is_an_error_in_audit_and_at_admission(
        case: str, tolerations: list[dict[str, Any]]) -> None:
    obj = _v1("team-b", tolerations)
    hits = _dra022([_ns("team-a", "exclusive-gpu"), _ns("team-b", "shared-gpu"), obj])
    assert [p for p, _ in hits] == ["spec.spec.devices.requests[0].exactly.tolerations[0]"], case
    assert denied_rules(POLICIES, obj) == {"DRA022"}, case
    claim = {**obj, "kind": "ResourceClaim", "spec": obj["spec"]["spec"]}
    assert denied_rules(POLICIES, claim) == {"DRA022"}, case


def test_v1beta1_and_first_available_shapes_are_checked_too() -> None:
    flat = claim_template([mig_request(tolerations=[own_toleration("team-a")])], namespace="team-b")
    first = _first("team-b", [own_toleration("team-a")])
    for obj, path in ((flat, "spec.spec.devices.requests[0].tolerations[0]"),
                      (first, "spec.spec.devices.requests[0].firstAvailable[0].tolerations[0]")):
        assert [p for p, _ in _dra022([obj])] == [path]
        assert denied_rules(POLICIES, obj) == {"DRA022"}


def test_own_and_shared_tolerations_pass_and_admin_access_is_exempt() -> None:
    own = _v1("team-a", [own_toleration("team-a")])
    shared = _v1("team-b", [shared_toleration()])
    admin = _v1("team-b", [own_toleration("team-a")], adminAccess=True)
    objects = [_ns("team-a", "exclusive-gpu"), _ns("team-b", "shared-gpu"), own, shared, admin]
    assert _dra022(objects) == []
    for obj in (own, shared, admin):
        assert "DRA022" not in denied_rules(POLICIES, obj)


def test_an_exclusive_tenant_must_carry_its_own_toleration_and_not_shared() -> None:
    missing = _v1("team-a", None)
    shared = _v1("team-a", [own_toleration("team-a"), shared_toleration()])
    sub_missing = _first("team-a", [own_toleration("team-a")])  # the "small" alternative lacks it
    ns = _ns("team-a", "exclusive-gpu")
    ((path, message),) = _dra022([ns, missing])
    assert path == "spec.spec.devices.requests[0].exactly" and "lacks the toleration" in message
    assert [p for p, _ in _dra022([ns, shared])] == ["spec.spec.devices.requests[0].exactly.tolerations[1]"]
    assert [p for p, _ in _dra022([ns, sub_missing])] == ["spec.spec.devices.requests[0].firstAvailable[1]"]
    # Without the Namespace's label the audit cannot know: a shared tenant may omit the toleration.
    assert _dra022([_ns("team-a", "shared-gpu"), missing]) == []
    # The tenant's own policy knows its level.
    for obj in (missing, shared, sub_missing):
        (message,) = evaluate(TENANT_POLICY, obj)
        assert message.startswith("DRA022: request gpu of exclusive-gpu tenant team-a"), message
    assert evaluate(TENANT_POLICY, _v1("team-a", [own_toleration("team-a")])) == []
    assert evaluate(TENANT_POLICY, _v1("team-a", None, adminAccess=True)) == []
    flat_ok = claim_template([mig_request(tolerations=[own_toleration("team-a")])], namespace="team-a")
    assert evaluate(TENANT_POLICY, flat_ok) == []
    assert evaluate(TENANT_POLICY, claim_template([mig_request()], namespace="team-a")) != []


def test_a_shared_tenant_s_policy_has_no_isolation_check() -> None:
    policy = device_class_policy_manifests("p", "team-b", ["mig.nvidia.com"], {})[0]
    assert evaluate(policy, _v1("team-b", None)) == []
    assert all(v["name"] != "isolationMissing" for v in policy["spec"]["variables"])


def test_suppression_is_honoured_by_the_generic_policy() -> None:
    obj = _v1("team-b", [own_toleration("team-a")])
    obj["metadata"]["annotations"] = {
        "guardrails.dra-constructs.io/suppressions": '[{"rule": "DRA022", "reason": "migration window"}]'}
    assert denied_rules(POLICIES, obj) == set()
