"""An audit's context (every manifest of the set, and the indexes over them) is freed with the audit.

The tenancy index refers back to its context; kept in a ``WeakKeyDictionary`` keyed by that
context, the value held the key alive: every audit, and every synth of an App with the
guardrails, kept its whole manifest set in memory for the life of the process.
"""

from __future__ import annotations

import gc

from dra_constructs.guardrails import audit
from dra_constructs.guardrails.context import AuditContext
from dra_constructs.guardrails.tenancy import tenancy
from dra_constructs.target import Target

from .helpers import gpu_pod_spec, pod


def _live_contexts() -> set[int]:
    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, AuditContext)}


def test_no_audit_context_outlives_its_audit() -> None:
    before = _live_contexts()
    result = audit([pod(gpu_pod_spec(), name=f"p{i}", namespace=f"team-{i % 2}") for i in range(4)],
                   kubernetes_version="1.34")
    assert result.findings  # the tenant rules ran (DRA009: no sanitizer for two tenants)
    assert _live_contexts() - before == set()


def test_the_tenancy_index_is_built_once_per_context() -> None:
    ctx = AuditContext([], Target.parse("1.34"))
    assert tenancy(ctx) is tenancy(ctx)
    assert tenancy(AuditContext([], ctx.target)) is not tenancy(ctx)
