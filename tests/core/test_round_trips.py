"""jsii exchanges per workload: fewer than the same objects built as plain ApiObjects (issue 14).

A count, not a timing: each exchange with the Node kernel (a request, or the answer to one of
Node's callbacks) is what dominates synth cost (docs/performance.md). Plain cdk8s needs 7 per
workload (2 creates, 2 ``JsonPatch.add``, 2 ``add_json_patch``, the template's ``name``); the
library needs 4: 2 creates, and at synth one ``to_json`` callback per object (names come from
Python, the specs never travel as patches).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import cdk8s
import pytest

from dra_constructs import Container, GpuClaimTemplate, GpuDeployment, GpuPod

from .helpers import jsii_exchanges


def _counting() -> AbstractContextManager[list[str]]:
    """The type of each request sent to Node while the block runs."""
    return jsii_exchanges(lambda request: type(request).__name__)


def _workload(chart: cdk8s.Chart, i: int) -> None:
    tmpl = GpuClaimTemplate.mig(chart, f"slice{i}", gpu="A100_80GB", profile="3g.40gb")
    GpuPod(chart, f"pod{i}", containers=[Container(name="app", image="registry.example/a:1", claims=(tmpl.use(),))])


def _plain(chart: cdk8s.Chart, i: int) -> None:
    tmpl = cdk8s.ApiObject(chart, f"slice{i}", api_version="resource.k8s.io/v1beta1", kind="ResourceClaimTemplate")
    tmpl.add_json_patch(cdk8s.JsonPatch.add("/spec", {"spec": {"devices": {}}}))
    pod = cdk8s.ApiObject(chart, f"pod{i}", api_version="v1", kind="Pod")
    pod.add_json_patch(cdk8s.JsonPatch.add("/spec", {"resourceClaims": [
        {"name": "c", "resourceClaimTemplateName": tmpl.name}]}))


def _exchanges(build: Any, n: int) -> tuple[list[str], list[str]]:
    """(construction, synth) exchanges for ``n`` workloads after the first."""
    app = cdk8s.App()
    chart = cdk8s.Chart(app, "bench")
    build(chart, 0)  # first object of the scope: context, guardrails, name check
    with _counting() as built:
        for i in range(1, n + 1):
            build(chart, i)
    with _counting() as synthesized:
        app.synth_yaml()
    return built, synthesized


def test_a_workload_costs_two_creates_and_two_callbacks() -> None:
    built, synthesized = _exchanges(_workload, 10)
    assert built == ["CreateRequest"] * 20
    _, more_synthesized = _exchanges(_workload, 20)
    assert len(more_synthesized) - len(synthesized) == 20  # one to_json answer per object
    assert synthesized.count("_CompleteRequest") >= 22  # jsii's answer to a callback


def test_fewer_exchanges_than_plain_api_objects() -> None:
    ours = [len(a) + len(b) for a, b in (_exchanges(_workload, 10), _exchanges(_workload, 20))]
    plain = [len(a) + len(b) for a, b in (_exchanges(_plain, 10), _exchanges(_plain, 20))]
    assert (ours[1] - ours[0]) / 10 == 4
    assert (plain[1] - plain[0]) / 10 == 7


@pytest.mark.parametrize("ids", [("web", "api"), ("my_web", "my.api")])
def test_a_deployment_needs_one_create(ids: tuple[str, str]) -> None:
    chart = cdk8s.Chart(cdk8s.App(), "c")
    first = GpuDeployment(chart, ids[0], containers=[Container(name="a", image="registry.example/a:1")])
    with _counting() as calls:
        second = GpuDeployment(chart, ids[1], containers=[Container(name="a", image="registry.example/a:1")])
    assert calls == ["CreateRequest"]  # no JsonPatch.add, no add_json_patch, no name
    docs = cdk8s.Testing.synth(chart)
    for obj, doc in zip((first, second), docs, strict=True):
        assert doc["metadata"]["name"] == obj.name
        assert doc["spec"]["selector"]["matchLabels"] == doc["spec"]["template"]["metadata"]["labels"]


def test_each_object_is_rendered_once_per_synth(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules' collection and the ``to_json`` callback share one Python rendering per object."""
    from dra_constructs.constructs import _rendered

    app = cdk8s.App()
    chart = cdk8s.Chart(app, "bench", labels={"team": "a"}, namespace="ns")
    for i in range(5):
        _workload(chart, i)
    original = _rendered._with_chart_defaults
    calls: list[str] = []

    def counting(manifest: dict[str, Any], *args: Any) -> dict[str, Any]:
        calls.append(manifest["metadata"]["name"])
        return original(manifest, *args)

    monkeypatch.setattr(_rendered, "_with_chart_defaults", counting)
    first = app.synth_yaml()
    assert len(calls) == 10 == len(set(calls))  # 10 objects, the rules and to_json share each rendering
    assert app.synth_yaml() == first and len(calls) == 10
    with _rendered.cdk8s_rendering():
        assert app.synth_yaml() == first  # byte-identical to cdk8s's own rendering
