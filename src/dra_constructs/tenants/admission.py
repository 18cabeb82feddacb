"""The tenant's own admission policy: claims in its namespace may name only its DeviceClasses (pure Python).

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

__all__ = ["device_class_policy_manifests"]

_API = "admissionregistration.k8s.io/v1"


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in sorted(values)) + "]"


def device_class_policy_manifests(
    name: str, namespace: str, allowed_classes: Sequence[str], labels: dict[str, str],
    validation_actions: Sequence[str] = ("Deny",),
) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy + binding limiting the tenant's claims to ``allowed_classes``."""
    allowed = _cel_list(allowed_classes)
    outside = (
        f"variables.requests.filter(r, has(r.firstAvailable) ? r.firstAvailable.exists(s, !(s.deviceClassName in "
        f"{allowed})) : (has(r.exactly) ? !(r.exactly.deviceClassName in {allowed}) : "
        f"(has(r.deviceClassName) && !(r.deviceClassName in {allowed})))).map(r, r.name)"
    )
    policy = {
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
