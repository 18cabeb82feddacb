"""DRA019: only the sanitizer's namespace may carry the admin-access label.

The API server admits ``adminAccess`` requests only in namespaces labelled
``resource.kubernetes.io/admin-access: "true"`` (``resource.k8s.io/admin-access`` through 1.34), and an
admin-access claim reaches devices already allocated to any namespace's workloads. No RBAC verb guards
the label itself: whoever may patch their own Namespace object can set it and hand ``adminAccess`` to
every claim creator there (kubernetes/kubernetes#141293, closed as working as designed). The only
namespace of a dra-constructs platform that may carry it is the sanitizer's: the namespace of a
DaemonSet labelled ``dra-constructs.io/component: sanitizer`` in the set. Any other node agent's
namespace takes a suppression with a reason (and an admission policy that keeps its users from
labelling Namespaces: ``GuardrailsAdmissionPolicy(admin_access_namespaces=...)``).
"""

from __future__ import annotations

from collections.abc import Iterator

from dra_constructs.guardrails.context import SANITIZER_LABEL, AuditContext
from dra_constructs.guardrails.manifest import Manifest, field_path
from dra_constructs.guardrails.model import Hit, Rule, Severity

__all__ = ["ADMIN_ACCESS_LABELS", "RULE", "admin_access_labels"]

#: Every Namespace label a release has used to allow adminAccess claims (the rename came in 1.34).
ADMIN_ACCESS_LABELS = ("resource.k8s.io/admin-access", "resource.kubernetes.io/admin-access")
#: The label of 1.34+: reported on every target (an upgrade makes it effective).
CURRENT_LABEL = "resource.kubernetes.io/admin-access"


def admin_access_labels(m: Manifest, keys: tuple[str, ...]) -> list[str]:
    """The labels among ``keys`` that ``m`` sets to ``"true"`` (the API server's exact, case-sensitive value)."""
    labels = m.labels()
    return [key for key in keys if labels.get(key) == "true"]


def _check(ctx: AuditContext) -> Iterator[tuple[Manifest, Hit]]:
    keys = tuple(sorted(set(ctx.target.admin_access_namespace_labels) | {CURRENT_LABEL}))
    component, value = SANITIZER_LABEL
    for m in ctx.representatives:  # (Namespaces are not memoized: each is one)
        if m.kind != "Namespace" or m.api_version != "v1" or m.name in ctx.sanitizer_namespaces:
            continue
        for key in admin_access_labels(m, keys):
            yield m, Hit(
                field_path("metadata", "labels", key),
                f"Namespace {m.name!r} is labelled {key}: \"true\" but runs no sanitizer DaemonSet (label "
                f"{component}: {value}) in the set: every ResourceClaim created there may ask for adminAccess and "
                "reach the devices of every namespace's workloads, and anyone allowed to patch this Namespace "
                "can set the label (kubernetes/kubernetes#141293)",
            )


RULE = Rule(
    id="DRA019",
    name="admin-access-namespace-sanitizer-only",
    severity=Severity.ERROR,
    why="an admin-access namespace lets every claim creator in it reach devices allocated to other tenants, and "
        "the label is guarded by no RBAC check of its own: anyone who may patch the Namespace can set it",
    fix="remove the admin-access label; only the sanitizer's namespace (where the DaemonSet labelled "
        "dra-constructs.io/component: sanitizer runs) may carry it. For another node agent, suppress DRA019 on "
        "the Namespace with a reason and deny label changes to its users: "
        "GuardrailsAdmissionPolicy(admin_access_namespaces=[...]) refuses the label on every other Namespace",
    set_check=_check,
)
