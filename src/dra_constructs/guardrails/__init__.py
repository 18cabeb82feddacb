"""Guardrails: the DRA compliance rules, enforced at synth, by ``dra-constructs audit`` and in the cluster.

The rule logic is pure Python over plain manifest dicts (no cdk8s import): :func:`audit`,
:func:`load_paths`, :data:`RULES`. The construct layer (``ensure_guardrails``,
``validate_app``, ``suppress``, ``GuardrailsAdmissionPolicy``) needs cdk8s and is imported
lazily on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from .context import SANITIZER_LABEL, TENANT_LABELS
from .engine import AuditResult, audit
from .loader import load_paths, load_text
from .manifest import Manifest
from .model import Finding, Rule, Severity, SuppressedFinding
from .rules import RULES, RULES_BY_ID
from .suppressions import SUPPRESSIONS_ANNOTATION, Suppression

if TYPE_CHECKING:
    from .admission_policy import GuardrailsAdmissionPolicy
    from .app_validation import GuardrailsError, enable_guardrails, ensure_guardrails, suppress, validate_app

_LAZY = {
    "GuardrailsAdmissionPolicy": ".admission_policy",
    "GuardrailsError": ".app_validation",
    "enable_guardrails": ".app_validation",
    "ensure_guardrails": ".app_validation",
    "suppress": ".app_validation",
    "validate_app": ".app_validation",
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
