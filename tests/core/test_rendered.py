"""The guardrails read the library's own dicts only while they equal cdk8s's rendering (issue 14)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import cdk8s
import pytest

from dra_constructs import Container, GpuClaimTemplate, GpuPod, GuardrailsError, set_kubernetes_version, suppress
from dra_constructs.constructs._rendered import chart_manifests

from .helpers import new_chart
from .test_examples import MAIN


def _pairs(app: cdk8s.App) -> list[tuple[list[Any], list[Any]]]:
    return [(chart_manifests(chart, app), [dict(d) for d in chart.to_json()]) for chart in app.charts]


def _workload(chart: cdk8s.Chart, id: str = "w") -> tuple[GpuClaimTemplate, GpuPod]:
    tmpl = GpuClaimTemplate.mig(chart, f"{id}-slice", gpu="A100_80GB", profile="3g.40gb")
    pod = GpuPod(chart, f"{id}-pod", containers=[Container(name="app", image="registry.example/a:1",
                                                           claims=(tmpl.use(),))])
    return tmpl, pod


@pytest.mark.parametrize(("example", "version"), [
    pytest.param(example, version, id=f"{example.__name__}-{version}")
    for example in MAIN.EXAMPLES for version in sorted(MAIN.TARGETS) if version in MAIN.targets_of(example)
])
def test_own_dicts_equal_cdk8s_rendering_for_every_example(example: ModuleType, version: str) -> None:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    example.build(app)
    for fast, rendered in _pairs(app):
        assert fast == rendered


def test_chart_labels_namespace_and_foreign_objects() -> None:
    app = cdk8s.Testing.app()
    chart = cdk8s.Chart(app, "c", labels={"team": "a", "app": "x"}, namespace="ml")
    _workload(chart, "one")
    GpuPod(chart, "labelled", namespace="other", labels={"app": "mine"},
           containers=[Container(name="c", image="registry.example/a:1")])
    cdk8s.ApiObject(chart, "cm", api_version="v1", kind="ConfigMap", metadata={"labels": {"k": "v"}})
    (fast, rendered), = _pairs(app)
    assert fast == rendered
    assert len(fast) == 4


def test_objects_count_as_own_until_touched() -> None:
    chart = new_chart()
    tmpl, pod = _workload(chart)
    assert tmpl._dra_manifest is not None and pod._dra_manifest is not None
    pod.add_json_patch(cdk8s.JsonPatch.add("/spec/hostname", "h"))
    tmpl.metadata.add_label("x", "y")
    assert tmpl._dra_manifest is None and pod._dra_manifest is None
    fast = chart_manifests(chart, chart.node.root)
    assert fast == [dict(d) for d in chart.to_json()]
    assert fast[1]["spec"]["hostname"] == "h" and fast[0]["metadata"]["labels"] == {"x": "y"}


def test_a_patch_after_construction_is_seen_by_the_guardrails() -> None:
    chart = new_chart()
    _, pod = _workload(chart)
    cdk8s.Testing.synth(chart)  # clean
    pod.add_json_patch(cdk8s.JsonPatch.replace("/spec/terminationGracePeriodSeconds", 0))
    with pytest.raises(GuardrailsError, match="DRA008"):
        cdk8s.Testing.synth(chart)


def test_a_metadata_change_after_construction_is_seen_by_the_guardrails() -> None:
    chart = new_chart()
    _, pod = _workload(chart)
    pod.metadata.add_annotation("guardrails.dra-constructs.io/suppressions", "not json")
    with pytest.raises(GuardrailsError, match="DRA000"):
        cdk8s.Testing.synth(chart)


def test_a_suppression_added_after_construction_is_seen() -> None:
    chart = new_chart()
    _, pod = _workload(chart)
    pod.add_json_patch(cdk8s.JsonPatch.replace("/spec/terminationGracePeriodSeconds", 0))
    suppress(pod, "DRA008", reason="batch pod, no checkpoint needed")
    docs = cdk8s.Testing.synth(chart)
    assert "guardrails.dra-constructs.io/suppressions" in docs[1]["metadata"]["annotations"]
