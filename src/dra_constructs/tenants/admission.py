"""The tenant's own admission policy: claims in its namespace may name only its DeviceClasses (pure Python);
an exclusive-gpu tenant's claims must also tolerate its own MIG isolation taint (DRA022).

ResourceQuota is allow-by-default per DeviceClass: a class the quota does not list is unlimited.
The quota closes the driver's classes (limit 0), and this ValidatingAdmissionPolicy closes every
other class (a class another tenant is entitled to, or one added to the cluster later): a
ResourceClaim or ResourceClaimTemplate in the tenant's namespace whose requests (``exactly``, flat
v1beta1, or any ``firstAvailable`` alternative) name another class is refused. The CEL is
standard CEL (tests evaluate it with a real CEL engine).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dra_constructs.isolation import ISOLATION_TAINT_KEY, SHARED_VALUE

__all__ = ["device_class_policy_manifests", "isolation_validation"]

_API = "admissionregistration.k8s.io/v1"


def _cel_str(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_cel_str(v) for v in sorted(values)) + "]"


def isolation_validation(namespace: str) -> tuple[dict[str, str], dict[str, Any]]:
    """DRA022 for an exclusive-gpu tenant: every request tolerates its own isolation taint and not ``Shared``.

    The variable (requests that lack it: a request, an ``exactly``, or a ``firstAvailable`` alternative;
    admin-access ones exempt) and the validation.
    """
    key, ns, shared = (_cel_str(v) for v in (ISOLATION_TAINT_KEY, namespace, SHARED_VALUE))
    own = (f"(has(t.key) && t.key == {key} && (!has(t.operator) || t.operator == 'Equal') && has(t.value) && "
           f"t.value == {ns})")
    other = f"(has(t.key) && t.key == {key} && has(t.value) && t.value == {shared})"

    def lacks(x: str) -> str:
        return f"!(has({x}.tolerations) && {x}.tolerations.exists(t, {own}) && !{x}.tolerations.exists(t, {other}))"

    missing = (
        "variables.requests.filter(r, (has(r.exactly) ? (!(has(r.exactly.adminAccess) && r.exactly.adminAccess) && "
        f"{lacks('r.exactly')}) : (has(r.firstAvailable) ? r.firstAvailable.exists(s, {lacks('s')}) : "
        f"(!(has(r.adminAccess) && r.adminAccess) && {lacks('r')})))).map(r, r.name)"
    )
    validation = {
        "expression": "size(variables.isolationMissing) == 0",
        "messageExpression": f"'DRA022: request ' + variables.isolationMissing[0] + ' of exclusive-gpu tenant "
                             f"{namespace} must tolerate its own MIG isolation taint ({ISOLATION_TAINT_KEY} Equal "
                             f"{namespace}) and not Shared; GpuTenant.claim_template renders it'",
        "reason": "Forbidden",
    }
    return {"name": "isolationMissing", "expression": missing}, validation


def device_class_policy_manifests(
    name: str, namespace: str, allowed_classes: Sequence[str], labels: dict[str, str],
    validation_actions: Sequence[str] = ("Deny",), exclusive_gpu: bool = False,
) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy + binding limiting the tenant's claims to ``allowed_classes``.

    ``exclusive_gpu``: also DRA022 for an exclusive-gpu tenant (:func:`isolation_validation`).
    """
    allowed = _cel_list(allowed_classes)
    outside = (
        f"variables.requests.filter(r, has(r.firstAvailable) ? r.firstAvailable.exists(s, !(s.deviceClassName in "
        f"{allowed})) : (has(r.exactly) ? !(r.exactly.deviceClassName in {allowed}) : "
        f"(has(r.deviceClassName) && !(r.deviceClassName in {allowed})))).map(r, r.name)"
    )
    policy: dict[str, Any] = {
        "apiVersion": _API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["resource.k8s.io"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": ["resourceclaims", "resourceclaimtemplates"],
            }]},
            "variables": [
                {"name": "claimSpec",
                 "expression": "object.kind == 'ResourceClaimTemplate' ? object.spec.spec : object.spec"},
                {"name": "requests", "expression": "has(variables.claimSpec.devices) && "
                                                   "has(variables.claimSpec.devices.requests) ? "
                                                   "variables.claimSpec.devices.requests : []"},
                {"name": "outside", "expression": outside},
            ],
            "validations": [{
                "expression": "size(variables.outside) == 0",
                "messageExpression": f"'DRA012: request ' + variables.outside[0] + ' names a DeviceClass outside "
                                     f"the quota of tenant namespace {namespace}; use one of "
                                     f"{', '.join(sorted(allowed_classes))}'",
                "reason": "Forbidden",
            }],
        },
    }
    if exclusive_gpu:
        variable, validation = isolation_validation(namespace)
        policy["spec"]["variables"].append(variable)
        policy["spec"]["validations"].append(validation)
    binding = {
        "apiVersion": _API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {
            "policyName": name,
            "validationActions": list(validation_actions),
            "matchResources": {"namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}]}},
        },
    }
    return [policy, binding]
