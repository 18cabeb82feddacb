"""jsii round trips per workload: fewer than the same objects built as plain ApiObjects (issue 14).

A count, not a timing: each round trip to the Node kernel is what dominates synth cost
(docs/performance.md). Plain cdk8s needs 7 per workload (2 creates, 2 ``JsonPatch.add``,
2 ``add_json_patch``, the template's ``name``); the library needs 6 (names come from Python).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cdk8s
import pytest
from jsii._kernel.providers import process

from dra_constructs import Container, GpuClaimTemplate, GpuDeployment, GpuPod


@contextmanager
def _counting() -> Iterator[list[str]]:
    calls: list[str] = []
    original = process._NodeProcess.send

    def send(self: Any, request: Any, response_type: Any) -> Any:
        calls.append(type(request).__name__)
        return original(self, request, response_type)

    process._NodeProcess.send = send  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        process._NodeProcess.send = original  # type: ignore[method-assign]


def _workload(chart: cdk8s.Chart, i: int) -> None:
    tmpl = GpuClaimTemplate.mig(chart, f"slice{i}", gpu="A100_80GB", profile="3g.40gb")
    GpuPod(chart, f"pod{i}", containers=[Container(name="app", image="registry.example/a:1", claims=(tmpl.use(),))])


def test_a_workload_costs_six_round_trips_after_the_first() -> None:
    chart = cdk8s.Chart(cdk8s.App(), "bench")
    _workload(chart, 0)  # first object of the scope: context, guardrails, name check
    with _counting() as calls:
        for i in range(1, 11):
            _workload(chart, i)
    assert len(calls) == 60, calls


@pytest.mark.parametrize("ids", [("web", "api"), ("my_web", "my.api")])
def test_a_deployment_needs_no_name_round_trip(ids: tuple[str, str]) -> None:
    chart = cdk8s.Chart(cdk8s.App(), "c")
    first = GpuDeployment(chart, ids[0], containers=[Container(name="a", image="registry.example/a:1")])
    with _counting() as calls:
        second = GpuDeployment(chart, ids[1], containers=[Container(name="a", image="registry.example/a:1")])
    assert len(calls) == 3, calls  # create, JsonPatch.add, add_json_patch
    docs = cdk8s.Testing.synth(chart)
    for obj, doc in zip((first, second), docs, strict=True):
        assert doc["metadata"]["name"] == obj.name
        assert doc["spec"]["selector"]["matchLabels"] == doc["spec"]["template"]["metadata"]["labels"]
