"""The admission side of DRA019: Namespaces may carry the admin-access label only where allowed.

kubernetes/kubernetes#141293: no RBAC verb guards the ``resource.kubernetes.io/admin-access`` label, so
whoever may patch their own Namespace grants ``adminAccess`` to every claim in it. The policy refuses the
label (either spelling, value ``"true"``) on every Namespace but the ones named in
``admin_access_namespaces`` (the sanitizer's, another node agent's). Unlike the other rules it honours
no suppression annotation: whoever can set the label on their Namespace can annotate it too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dra_constructs.guardrails.rules.admin_access_namespace import ADMIN_ACCESS_LABELS

__all__ = ["namespace_validations", "namespace_variables"]


def _cel_list(values: Sequence[str]) -> str:
    return "[" + ", ".join("'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'" for v in sorted(values)) + "]"


def namespace_variables() -> list[dict[str, str]]:
    """CEL variables of the Namespace policy: the admin-access labels the object sets to ``"true"``."""
    return [{
        "name": "adminAccessLabels",
        "expression": "has(object.metadata.labels) ? "
                      f"{_cel_list(ADMIN_ACCESS_LABELS)}.filter(k, k in object.metadata.labels && "
                      "object.metadata.labels[k] == 'true') : []",
    }]


def namespace_validations(rules: Sequence[str], allowed: Sequence[str]) -> list[dict[str, Any]]:
    """DRA019's validation (none when the rule is not enforced)."""
    if "DRA019" not in rules:
        return []
    exempt = f" || object.metadata.name in {_cel_list(allowed)}" if allowed else ""
    where = (f"only {', '.join(sorted(allowed))} may carry it (admin_access_namespaces)" if allowed
             else "no namespace may carry it here (the sanitizer needs no admin access)")
    return [{
        "expression": f"size(variables.adminAccessLabels) == 0{exempt}",
        "messageExpression": "'DRA019: Namespace ' + object.metadata.name + ' may not carry the label ' + "
                             "variables.adminAccessLabels[0] + '=true: every ResourceClaim in it could take "
                             "adminAccess to devices allocated to other namespaces (kubernetes/kubernetes#141293); "
                             f"{where}'",
        "reason": "Forbidden",
    }]
