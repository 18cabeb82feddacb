"""Guardrails: the DRA compliance rules, enforced at synth, by ``dra-constructs audit`` and in the cluster.

The rule logic is pure Python over plain manifest dicts (no cdk8s import): :func:`audit`,
:func:`load_paths`, :data:`RULES`. The construct layer (``ensure_guardrails``,
``validate_app``, ``suppress``, ``GuardrailsAdmissionPolicy``) needs cdk8s and is imported
lazily on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dra_constructs._lazy import lazy_getattr
from dra_constructs.guardrails.context import SANITIZER_LABEL, TENANT_LABELS
from dra_constructs.guardrails.engine import AuditResult, audit
from dra_constructs.guardrails.loader import load_paths, load_text
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.model import Finding, Rule, Severity, SuppressedFinding
from dra_constructs.guardrails.rules import RULES, RULES_BY_ID
from dra_constructs.guardrails.suppressions import SUPPRESSIONS_ANNOTATION, Suppression

if TYPE_CHECKING:
    from dra_constructs.constructs.admission_policy import GuardrailsAdmissionPolicy
    from dra_constructs.constructs.guardrails import (
        GuardrailsError,
        enable_guardrails,
        ensure_guardrails,
        suppress,
        validate_app,
    )

_LAZY = {
    "GuardrailsAdmissionPolicy": "dra_constructs.constructs.admission_policy",
    "GuardrailsError": "dra_constructs.constructs.guardrails",
    "enable_guardrails": "dra_constructs.constructs.guardrails",
    "ensure_guardrails": "dra_constructs.constructs.guardrails",
    "suppress": "dra_constructs.constructs.guardrails",
    "validate_app": "dra_constructs.constructs.guardrails",
}

__all__ = [
    "RULES",
    "RULES_BY_ID",
    "SANITIZER_LABEL",
    "SUPPRESSIONS_ANNOTATION",
    "TENANT_LABELS",
    "AuditResult",
    "Finding",
    "GuardrailsAdmissionPolicy",
    "GuardrailsError",
    "Manifest",
    "Rule",
    "Severity",
    "SuppressedFinding",
    "Suppression",
    "audit",
    "enable_guardrails",
    "ensure_guardrails",
    "load_paths",
    "load_text",
    "suppress",
    "validate_app",
]


__getattr__ = lazy_getattr(__name__, _LAZY)
