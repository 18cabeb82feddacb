"""GpuTenant(mig_isolation=...): the rendered tolerations, the Namespace label, the tenant's policy, the errors."""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest
from core.helpers import validate_any_schema
from guardrails.vap import evaluate

from dra_constructs import DraConstructsError, GpuModel, set_kubernetes_version
from dra_constructs.guardrails import audit
from dra_constructs.isolation import ISOLATION_LABEL, ISOLATION_TAINT_KEY
from dra_constructs.tenants import GpuTenant, Mig, WholeGpu

SLICE = Mig(GpuModel.H100_80GB, "1g.10gb")


def _synth(version: str, *tenants: tuple[str, str | None]) -> list[dict[str, Any]]:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    chart = cdk8s.Chart(app, "platform")
    for name, level in tenants:
        tenant = GpuTenant(chart, name, quotas={SLICE: 4, WholeGpu(GpuModel.H100_80GB): 1},
                           mig_isolation=level)  # type: ignore[arg-type]
        apps = cdk8s.Chart(app, f"apps-{name}", namespace=tenant.namespace)
        tenant.claim_template(apps, "slice", SLICE, count=2)
        tenant.claim_template(apps, "whole", WholeGpu(GpuModel.H100_80GB))
    docs: list[dict[str, Any]] = []
    for each in app.charts:
        docs.extend(dict(d) for d in cdk8s.Testing.synth(each))
    return docs


def _tolerations(docs: list[dict[str, Any]], namespace: str) -> list[list[dict[str, Any]]]:
    return [r["exactly"].get("tolerations") for d in docs if d["kind"] == "ResourceClaimTemplate"
            and d["metadata"]["namespace"] == namespace for r in d["spec"]["spec"]["devices"]["requests"]]


@pytest.mark.parametrize("version", ["1.34", "1.37"])
def test_levels_render_their_tolerations_and_pass_the_guardrails(version: str) -> None:
    docs = _synth(version, ("team-a", "exclusive-gpu"), ("team-b", "shared-gpu"), ("team-c", None))
    for doc in docs:
        validate_any_schema(doc, version)
    own = {"key": ISOLATION_TAINT_KEY, "operator": "Equal", "value": "team-a"}
    assert _tolerations(docs, "team-a") == [[own], [own]]
    assert _tolerations(docs, "team-b") == [[{"key": ISOLATION_TAINT_KEY, "operator": "Equal", "value": "Shared"}]] * 2
    assert _tolerations(docs, "team-c") == [None, None]  # no level: today's claims
    labels = {d["metadata"]["name"]: d["metadata"]["labels"] for d in docs if d["kind"] == "Namespace"}
    assert labels["team-a"][ISOLATION_LABEL] == "exclusive-gpu" and labels["team-b"][ISOLATION_LABEL] == "shared-gpu"
    assert ISOLATION_LABEL not in labels["team-c"]
    result = audit(docs, kubernetes_version=version)
    assert not [f for f in result.findings if f.rule == "DRA022"]


def test_the_exclusive_tenant_s_policy_refuses_a_claim_without_its_toleration() -> None:
    docs = _synth("1.34", ("team-a", "exclusive-gpu"))
    [policy] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"
                and d["metadata"]["name"] == "dra-tenant-team-a-device-classes"]
    [template] = [d for d in docs if d["kind"] == "ResourceClaimTemplate"
                  and d["spec"]["spec"]["devices"]["requests"][0]["name"] == "mig"]
    assert evaluate(policy, template) == []
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    bare = {**template, "spec": {"spec": {"devices": {"requests": [
        {"name": "mig", "exactly": {k: v for k, v in exactly.items() if k != "tolerations"}}]}}}}
    (message,) = evaluate(policy, bare)
    assert message.startswith("DRA022: request mig of exclusive-gpu tenant team-a")


def test_a_target_without_device_taints_refuses_the_level() -> None:
    with pytest.raises(DraConstructsError, match=r"mig_isolation.*DeviceTaintRule.*target 1\.33 or later"):
        _synth("1.32", ("team-a", "exclusive-gpu"))


def test_an_unknown_level_is_refused() -> None:
    with pytest.raises(DraConstructsError, match=r"mig_isolation.*not an isolation level.*exclusive-gpu"):
        _synth("1.34", ("team-a", "exclusive"))


def test_an_exclusive_tenant_with_amd_quotas_passes_its_own_checks() -> None:
    from dra_constructs import AmdPartition

    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.34")
    chart = cdk8s.Chart(app, "platform")
    partition = AmdPartition("MI300X", "cpx_nps4")
    tenant = GpuTenant(chart, "team-a", quotas={partition: 8, SLICE: 2}, mig_isolation="exclusive-gpu")
    apps = cdk8s.Chart(app, "apps", namespace="team-a")
    tenant.claim_template(apps, "part", partition)
    tenant.claim_template(apps, "slice", SLICE)
    docs = [dict(d) for each in app.charts for d in cdk8s.Testing.synth(each)]  # synth runs the guardrails
    [policy] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"
                and d["metadata"]["name"] == "dra-tenant-team-a-device-classes"]
    for template in (d for d in docs if d["kind"] == "ResourceClaimTemplate"):
        assert evaluate(policy, template) == []
    assert not [f for f in audit(docs, kubernetes_version="1.34").findings if f.rule == "DRA022"]
