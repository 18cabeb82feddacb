"""Prioritized alternatives (firstAvailable, Kubernetes 1.33+)."""

from __future__ import annotations

import pytest

from dra_constructs import (
    Container,
    CustomRequest,
    DraConstructsError,
    FirstAvailable,
    GpuClaimTemplate,
    GpuModel,
    GpuPod,
    GpuRequest,
    MigRequest,
)

from .helpers import by_kind, new_chart, synth, validate_schema


def alternatives(min_memory: str = "79Gi") -> FirstAvailable:
    return FirstAvailable(name="gpu", alternatives=(
        MigRequest(name="h100-slice", gpu=GpuModel.H100_80GB, profile="3g.40gb"),
        GpuRequest(name="whole-a30", models=(GpuModel.A30,)),
        GpuRequest(name="big", min_memory=min_memory),
    ))


@pytest.mark.parametrize("version", ["1.33", "1.34", "1.36"])
def test_first_available_renders_and_validates(version: str) -> None:
    chart = new_chart(version)
    template = GpuClaimTemplate(chart, "flex", requests=[alternatives()])
    GpuPod(chart, "pod", containers=[Container(name="c", image="i", claims=(template.use("gpu/whole-a30"),))])
    docs = synth(chart)
    (claim,) = by_kind(docs, "ResourceClaimTemplate")
    request = claim["spec"]["spec"]["devices"]["requests"][0]
    assert [sub["name"] for sub in request["firstAvailable"]] == ["h100-slice", "whole-a30", "big"]
    assert request["firstAvailable"][0]["deviceClassName"] == "mig.nvidia.com"
    assert all(sub["allocationMode"] == "ExactCount" and sub["count"] == 1 for sub in request["firstAvailable"])
    assert by_kind(docs, "Pod")[0]["spec"]["containers"][0]["resources"]["claims"] == [
        {"name": "flex", "request": "gpu/whole-a30"}]
    for doc in docs:
        validate_schema(doc, version)


def test_first_available_needs_1_33() -> None:
    with pytest.raises(DraConstructsError, match=r"from Kubernetes 1\.33"):
        GpuClaimTemplate(new_chart("1.32"), "flex", requests=[alternatives()])


def test_one_satisfiable_alternative_is_enough_none_is_an_error() -> None:
    GpuClaimTemplate(new_chart("1.34"), "ok", requests=[FirstAvailable(name="gpu", alternatives=(
        GpuRequest(name="huge", min_memory="1Ti"), GpuRequest(name="h200", models=(GpuModel.H200_141GB,))))])
    with pytest.raises(DraConstructsError, match="no alternative can be allocated") as info:
        GpuClaimTemplate(new_chart("1.34"), "bad", requests=[FirstAvailable(name="gpu", alternatives=(
            GpuRequest(name="huge", min_memory="1Ti"), GpuRequest(name="h100", models=(GpuModel.H100_80GB,),
                                                               min_memory="80Gi")))])
    assert "huge" in info.value.problem and "h100" in info.value.problem


@pytest.mark.parametrize(
    ("request_", "match"),
    [
        (FirstAvailable(name="gpu", alternatives=()), "1 to 8"),
        (FirstAvailable(name="gpu", alternatives=tuple(
            GpuRequest(name=f"a{i}", models=(GpuModel.A30,)) for i in range(9))), "1 to 8"),
        (FirstAvailable(name="gpu", alternatives=(GpuRequest(name="a", models=(GpuModel.A30,)),
                                                  GpuRequest(name="a", models=(GpuModel.A100_40GB,)))), "duplicate"),
        (FirstAvailable(name="gpu", alternatives=(CustomRequest(
            name="admin", device_class_name="gpu.nvidia.com", allocation_mode="All", admin_access=True),)),
         "admin access"),
    ],
)
def test_bad_alternatives_are_refused(request_: FirstAvailable, match: str) -> None:
    with pytest.raises(DraConstructsError, match=match):
        GpuClaimTemplate(new_chart("1.34"), "flex", requests=[request_])


def test_use_accepts_request_and_alternative_names_only() -> None:
    template = GpuClaimTemplate(new_chart("1.34"), "flex", requests=[alternatives()])
    assert template.use("gpu").request == "gpu"
    assert template.use("gpu/big").request == "gpu/big"
    with pytest.raises(DraConstructsError, match="no request of that name"):
        template.use("gpu/small")
