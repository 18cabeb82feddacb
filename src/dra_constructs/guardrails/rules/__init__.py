"""The dra-constructs rule pack: one module per rule, each a small pure function over manifest dicts."""

from __future__ import annotations

from dra_constructs.guardrails.model import Rule
from dra_constructs.guardrails.rules import (
    admin_access_namespace,
    amd_attributes,
    barrier_toleration,
    claim_references,
    cross_tenant_shares,
    dra_extended_resources,
    env_selection,
    exact_count,
    extended_resources,
    grace_period,
    gvisor_gpu,
    kueue_admission,
    mig_isolation,
    removed_shapes,
    selectors,
    software_sharing,
    suppression_syntax,
    target_version,
    tenant_barrier,
    tenant_isolation,
    tenant_quota,
    topology_alignment,
)

__all__ = ["RULES", "RULES_BY_ID"]

#: Every rule, in id order.
RULES: tuple[Rule, ...] = (
    suppression_syntax.RULE,
    extended_resources.RULE,
    env_selection.RULE,
    exact_count.RULE,
    selectors.RULE,
    claim_references.RULE,
    software_sharing.RULE,
    removed_shapes.RULE,
    grace_period.RULE,
    tenant_barrier.RULE,
    dra_extended_resources.RULE,
    target_version.RULE,
    tenant_quota.RULE,
    tenant_isolation.RULE,
    kueue_admission.RULE,
    topology_alignment.RULE,
    barrier_toleration.RULE,
    amd_attributes.RULE,
    admin_access_namespace.RULE,
    gvisor_gpu.RULE,
    cross_tenant_shares.RULE,
    mig_isolation.RULE,
)

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
