"""The library's objects render in Python exactly as cdk8s renders them (issue 14).

``to_json`` is overridden: the spec never travels to Node as a JSON patch unless something
needs cdk8s's own rendering. Every test compares YAML text byte for byte with that rendering
(``cdk8s_rendering()``: the deferred patches are handed to Node and cdk8s renders).
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import cdk8s
import jsii
import pytest

from dra_constructs import (
    Container,
    GpuClaimTemplate,
    GpuDeployment,
    GpuJob,
    GpuPod,
    GpuStatefulSet,
    GuardrailsError,
    PreemptionPolicy,
    set_kubernetes_version,
    suppress,
)
from dra_constructs.constructs._rendered import cdk8s_rendering, chart_manifests

from .helpers import new_chart
from .test_examples import MAIN


def _both(app: cdk8s.App) -> tuple[str, str]:
    """(Python rendering, cdk8s's rendering) of the same App."""
    fast = app.synth_yaml()
    with cdk8s_rendering():
        slow = app.synth_yaml()
    return fast, slow


def _workload(chart: cdk8s.Chart, id: str = "w") -> tuple[GpuClaimTemplate, GpuPod]:
    tmpl = GpuClaimTemplate.mig(chart, f"{id}-slice", gpu="A100_80GB", profile="3g.40gb")
    pod = GpuPod(chart, f"{id}-pod", containers=[Container(name="app", image="registry.example/a:1",
                                                           claims=(tmpl.use(),))])
    return tmpl, pod


@pytest.mark.parametrize(("example", "version"), [
    pytest.param(example, version, id=f"{example.__name__}-{version}")
    for example in MAIN.EXAMPLES for version in sorted(MAIN.TARGETS) if version in MAIN.targets_of(example)
])
def test_python_rendering_is_cdk8s_rendering_for_every_example(example: ModuleType, version: str) -> None:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    example.build(app)
    fast, slow = _both(app)
    assert fast == slow
    for chart in app.charts:  # the guardrails read the same dicts
        assert chart_manifests(chart, app) == [dict(d) for d in chart.to_json()]


def test_chart_labels_namespace_metadata_order_and_foreign_objects() -> None:
    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.34")
    chart = cdk8s.Chart(app, "c", labels={"team": "a", "app": "x", "10": "n", "2": "m"}, namespace="ml")
    _workload(chart, "one")
    GpuPod(chart, "labelled", namespace="other", labels={"app": "mine", "Zeta": "z", "alpha": "a", "01": "o"},
           annotations={"b.example/x": "ünïcode ✓", "a.example/y": "", "1": "one"},
           containers=[Container(name="c", image="registry.example/a:1")])
    GpuDeployment(chart, "web", replicas=2, pod_labels={"tier": "gpu"}, pod_annotations={"k": "v"},
                  containers=[Container(name="c", image="registry.example/a:1")])
    GpuJob(chart, "batch", completions=4, parallelism=2, containers=[Container(name="c", image="registry.example/a:1")])
    GpuStatefulSet(chart, "db", service_name="db", containers=[Container(name="c", image="registry.example/a:1")])
    GpuClaimTemplate.whole_gpus(chart, "big", count=2, models=["H100_80GB"], claim_labels={"z": "1", "a": "2"},
                                preemption_policy=PreemptionPolicy())
    cdk8s.ApiObject(chart, "cm", api_version="v1", kind="ConfigMap", metadata={"labels": {"k": "v"}})
    fast, slow = _both(app)
    assert fast == slow
    assert fast.count("\nkind: ") + 1 == 9


def test_a_chart_without_namespace_or_labels_and_a_nested_chart() -> None:
    app = cdk8s.Testing.app()
    outer = cdk8s.Chart(app, "outer", labels={"o": "1"})
    inner = cdk8s.Chart(outer, "inner", namespace="in", labels={"i": "2"})
    _workload(outer, "a")
    _workload(inner, "b")
    fast, slow = _both(app)
    assert fast == slow
    assert "namespace: in" in fast


def test_an_app_with_its_own_resolver_renders_through_cdk8s() -> None:
    @jsii.implements(cdk8s.IResolver)
    class Upper:
        def resolve(self, context: cdk8s.ResolutionContext) -> None:
            if isinstance(context.value, str) and context.value.startswith("shout-"):
                context.replace_value(context.value.upper())

    app = cdk8s.App(resolvers=[Upper()])
    chart = cdk8s.Chart(app, "c")
    pod = GpuPod(chart, "p", labels={"team": "shout-a"}, containers=[Container(name="c", image="registry.example/a:1")])
    fast, slow = _both(app)
    assert fast == slow
    assert "team: SHOUT-A" in fast  # resolvers apply to metadata (cdk8s applies patches after resolving)
    assert pod._dra_manifest is None  # handed to cdk8s for good


def test_cdk8s_disable_sort_renders_through_cdk8s(monkeypatch: pytest.MonkeyPatch) -> None:
    chart = new_chart()
    GpuPod(chart, "p", labels={"b": "1", "a": "2"}, containers=[Container(name="c", image="registry.example/a:1")])
    monkeypatch.setenv("CDK8S_DISABLE_SORT", "1")
    fast, slow = _both(chart.node.root)  # type: ignore[arg-type]
    assert fast == slow


def test_objects_render_in_python_until_touched() -> None:
    chart = new_chart()
    tmpl, pod = _workload(chart)
    assert tmpl._dra_manifest is not None and pod._dra_manifest is not None
    untouched = [dict(d) for d in chart.to_json()]
    pod.add_json_patch(cdk8s.JsonPatch.add("/spec/hostname", "h"))
    tmpl.metadata.add_label("x", "y")
    assert tmpl._dra_manifest is None and pod._dra_manifest is None
    docs = [dict(d) for d in chart.to_json()]  # cdk8s renders them now, with the deferred spec first
    assert chart_manifests(chart, chart.node.root) == docs
    assert docs[1]["spec"] == {**untouched[1]["spec"], "hostname": "h"}
    assert docs[0]["spec"] == untouched[0]["spec"] and docs[0]["metadata"]["labels"] == {"x": "y"}


def test_a_patch_replacing_a_deferred_field_applies_to_it() -> None:
    chart = new_chart()
    _, pod = _workload(chart)
    pod.add_json_patch(cdk8s.JsonPatch.replace("/spec/terminationGracePeriodSeconds", 120))
    assert cdk8s.Testing.synth(chart)[1]["spec"]["terminationGracePeriodSeconds"] == 120


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


def test_python_to_json_returns_the_rendered_manifest() -> None:
    chart = new_chart()
    tmpl, pod = _workload(chart)
    rendered: Any = pod.to_json()
    assert list(rendered) == ["apiVersion", "kind", "metadata", "spec"]
    assert rendered["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == tmpl.name


def test_python_to_json_orders_keys_as_cdk8s_returns_them() -> None:
    chart = cdk8s.Chart(cdk8s.Testing.app(), "c", labels={"b": "1", "10": "2", "2": "3", "01": "4"})
    pod = GpuPod(chart, "p", labels={"Z": "5", "a": "6"}, annotations={"3": "x", "c": "y"},
                 containers=[Container(name="c", image="registry.example/a:1")])
    fast = pod.to_json()
    with cdk8s_rendering():
        slow = pod.to_json()
    assert json.dumps(fast) == json.dumps(slow)
    assert list(fast["metadata"]["labels"]) == ["2", "10", "01", "Z", "a", "b"]


def test_changing_what_to_json_returned_changes_nothing() -> None:
    chart = new_chart()
    _, pod = _workload(chart)
    doc = pod.to_json()
    doc["spec"]["containers"][0]["image"] = "evil/x:1"
    doc["metadata"]["name"] = "other"
    assert cdk8s.Testing.synth(chart)[1]["spec"]["containers"][0]["image"] == "registry.example/a:1"
    assert pod.to_json()["metadata"]["name"] == pod.name
