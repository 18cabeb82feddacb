"""The library's objects create their ApiObject with one jsii create, without cdk8s's generated typeguard checks.

``OwnManifest._dra_create`` replaces ``cdk8s.ApiObject.__init__`` (which type-checks every
argument and props field with typeguard before the same create): the values are the library's
own, checked already; what the generated checks refused for any caller stays a ``TypeError``.
That the objects still render as cdk8s renders them (the props reach Node as a map, not a
struct) is tests/core/test_rendered.py's comparison.
"""

from __future__ import annotations

from typing import Any

import cdk8s
import pytest


@pytest.mark.parametrize(("scope_is_chart", "id"), [(False, "p"), (True, 7)])
def test_the_create_still_refuses_what_the_generated_checks_refused(scope_is_chart: bool, id: Any) -> None:
    """Without cdk8s's typeguard checks, a scope that is no Construct or an id that is no str is still a TypeError."""
    from dra_constructs.constructs._rendered import OwnManifest

    chart = cdk8s.Chart(cdk8s.App(), "c")

    class _Object(OwnManifest, cdk8s.ApiObject):
        def __init__(self, scope: Any, id: Any) -> None:
            self._dra_create(scope, id, "v1", "ConfigMap", None)

    with pytest.raises(TypeError, match="scope must be" if not scope_is_chart else "id must be"):
        _Object(chart if scope_is_chart else object(), id)


def test_building_a_workload_runs_no_generated_type_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """cdk8s's generated ``__init__``s call ``check_type`` per argument and props field; the library's objects none."""
    from dra_constructs import Container, GpuClaimTemplate, GpuDeployment, GpuPod

    calls: list[str] = []
    generated = cdk8s.ApiObject.__init__.__globals__  # the generated module's namespace (publication hides it)
    original = generated["check_type"]

    def counting(*, argname: str, value: Any, expected_type: Any) -> None:
        calls.append(argname)
        original(argname=argname, value=value, expected_type=expected_type)

    chart = cdk8s.Chart(cdk8s.App(), "c", labels={"team": "a"})
    first = GpuClaimTemplate.mig(chart, "first", gpu="A100_80GB", profile="1g.10gb")  # per-scope setup (Chart.of)
    GpuPod(chart, "first-pod", containers=[Container(name="a", image="registry.example/a:1", claims=(first.use(),))])
    monkeypatch.setitem(generated, "check_type", counting)
    tmpl = GpuClaimTemplate.mig(chart, "slice", gpu="A100_80GB", profile="3g.40gb", labels={"app": "x"})
    GpuPod(chart, "pod", containers=[Container(name="a", image="registry.example/a:1", claims=(tmpl.use(),))],
           namespace="ns", annotations={"note": "n"})
    GpuDeployment(chart, "web", containers=[Container(name="a", image="registry.example/a:1")])
    assert calls == []
    cdk8s.ApiObject(chart, "plain", api_version="v1", kind="ConfigMap")
    assert calls  # the generated constructor still checks, so the count above can fail
