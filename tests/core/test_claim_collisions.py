"""Claim names that collide, and templates of another namespace: refused when the workload is built.

Before, the second of two templates sharing a pod claim name vanished from ``spec.resourceClaims``
while the container listed the name twice (the API server rejects the Pod), and a template of
another namespace was accepted (the Pod would stay Pending).
"""

from __future__ import annotations

import cdk8s
import cdk8s_plus_28 as kplus
import pytest

from dra_constructs import (
    ClaimUse,
    Container,
    DraConstructsError,
    GpuClaimTemplate,
    GpuDeployment,
    GpuModel,
    GpuPod,
    PodClaim,
    attach_claims,
    set_kubernetes_version,
)

from .helpers import new_chart


def _mig(scope: cdk8s.Chart, id: str, **kwargs: object) -> GpuClaimTemplate:
    return GpuClaimTemplate.mig(scope, id, gpu=GpuModel.A100_80GB, profile="1g.10gb", **kwargs)  # type: ignore[arg-type]


def _app(*charts: tuple[str, str | None]) -> list[cdk8s.Chart]:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.34")
    return [cdk8s.Chart(app, name, namespace=namespace) for name, namespace in charts]


def test_same_id_in_two_charts_used_by_one_container() -> None:
    first, second = _app(("first", "ml"), ("second", "ml"))
    a, b = _mig(first, "llm-slice"), _mig(second, "llm-slice")
    assert a.claim_name == b.claim_name and a.template_name != b.template_name
    with pytest.raises(DraConstructsError, match=rf"{a.template_name}.*{b.template_name}.*claim_name="):
        GpuPod(first, "p", containers=[Container(name="c", image="i", claims=(a.use(), b.use()))])


def test_ids_that_make_the_same_dns_label_in_two_containers() -> None:
    chart = new_chart("1.34")
    a, b = _mig(chart, "LLM_Slice"), _mig(chart, "llm-slice")
    with pytest.raises(DraConstructsError, match="two claims share the pod claim name 'llm-slice'"):
        GpuDeployment(chart, "d", containers=[Container(name="x", image="i", claims=(a.use(),)),
                                              Container(name="y", image="i", claims=(b.use(),))])
    renamed = _mig(chart, "llm-slice-2", claim_name="other-slice")
    GpuDeployment(chart, "ok", containers=[Container(name="x", image="i", claims=(a.use(), renamed.use()))])


def test_a_template_named_like_an_explicit_claim() -> None:
    chart = new_chart("1.34")
    slice_ = _mig(chart, "gpu")
    with pytest.raises(DraConstructsError, match="ResourceClaim 'team-claim' and template"):
        GpuPod(chart, "p", containers=[Container(name="c", image="i", claims=(slice_.use(),))],
               claims=[PodClaim(name="gpu", resource_claim_name="team-claim")])


def test_one_claim_listed_twice_by_a_container() -> None:
    chart = new_chart("1.34")
    slice_ = _mig(chart, "s")
    with pytest.raises(DraConstructsError, match="listed twice"):
        GpuPod(chart, "p", containers=[Container(name="c", image="i", claims=(slice_.use(), slice_.use()))])
    GpuPod(chart, "ok", containers=[Container(name="c", image="i", claims=(slice_.use(), slice_.use("mig")))])


def test_attach_claims_refuses_the_same_collisions() -> None:
    first, second = _app(("first", "ml"), ("second", "ml"))
    a, b = _mig(first, "llm-slice"), _mig(second, "llm-slice")
    deployment = kplus.Deployment(first, "vllm", containers=[kplus.ContainerProps(name="vllm", image="i")])
    with pytest.raises(DraConstructsError, match="two claims share the pod claim name"):
        attach_claims(deployment, {"vllm": [a.use(), b.use()]})
    attach_claims(deployment, {"vllm": [a.use()]})
    with pytest.raises(DraConstructsError, match="two claims share the pod claim name"):
        attach_claims(deployment, {"vllm": [b.use()]})  # a later call, same collision


def test_a_template_of_another_namespace_is_refused() -> None:
    platform, tenant_b = _app(("team-a", "team-a"), ("team-b", "team-b"))
    theirs = _mig(platform, "slice")
    with pytest.raises(DraConstructsError, match=r"team-a/.*is in namespace 'team-a', this pod in 'team-b'"):
        GpuDeployment(tenant_b, "d", containers=[Container(name="c", image="i", claims=(theirs.use(),))])
    with pytest.raises(DraConstructsError, match="own namespace"):
        GpuPod(platform, "p", namespace="team-b", containers=[Container(name="c", image="i", claims=(theirs.use(),))])
    explicit = _mig(platform, "for-b", namespace="team-b")
    GpuPod(tenant_b, "ok", containers=[Container(name="c", image="i", claims=(explicit.use(),))])
    deployment = kplus.Deployment(tenant_b, "vllm", containers=[kplus.ContainerProps(name="vllm", image="i")])
    with pytest.raises(DraConstructsError, match="own namespace"):
        attach_claims(deployment, {"vllm": [theirs.use()]})


def test_no_namespace_on_either_side_is_not_judged() -> None:
    (plain,) = _app(("plain", None))
    slice_ = _mig(plain, "s", namespace="team-a")
    GpuPod(plain, "p", containers=[Container(name="c", image="i", claims=(slice_.use(),))])
    assert slice_.use().template_namespace == "team-a"
    assert ClaimUse(claim="x").template_namespace is None
