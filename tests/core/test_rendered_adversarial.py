"""Trying to make the Python rendering differ from cdk8s's own (a review of issue 14's change).

Each test builds an App, renders it in Python and through cdk8s (``cdk8s_rendering()``) and
compares bytes, or checks behaviour a user sees (guardrails, errors). Where a test also asserts
``_dra_manifest is not None`` it proves Python really rendered (not a silent fallback).
"""

from __future__ import annotations

import datetime
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import cdk8s
import cdk8s_plus_28 as kplus
import constructs
import jsii
import pytest

from dra_constructs import (
    Container,
    DraConstructsError,
    GpuClaimTemplate,
    GpuDeployment,
    GpuJob,
    GpuPod,
    GuardrailsError,
    attach_claims,
    set_kubernetes_version,
    suppress,
)
from dra_constructs.constructs._rendered import cdk8s_rendering, chart_manifests
from dra_constructs.constructs.admission_policy import GuardrailsAdmissionPolicy

from .test_examples import MAIN

IMAGE = "registry.example/a:1"


def _both(app: cdk8s.App, *objs: Any) -> tuple[str, str, bool]:
    """(Python's YAML, cdk8s's YAML, whether Python rendered every one of ``objs``).

    cdk8s's rendering materializes the objects for good, so ``objs`` are checked in between.
    """
    fast = app.synth_yaml()
    in_python = all(o._dra_manifest is not None for o in objs)
    with cdk8s_rendering():
        slow = app.synth_yaml()
    return fast, slow, in_python


def _app(version: str = "1.34", **props: Any) -> cdk8s.App:
    app = cdk8s.App(**props) if props else cdk8s.Testing.app()
    set_kubernetes_version(app, version)
    return app


def _pair(scope: constructs.Construct, id: str, *, use: bool = True, **pod: Any) -> tuple[GpuClaimTemplate, GpuPod]:
    """A claim template and a pod (using it: GPU pods of several namespaces need a sanitizer, DRA009)."""
    tmpl = GpuClaimTemplate.mig(scope, f"{id}-slice", gpu="A100_80GB", profile="3g.40gb")
    claims = (tmpl.use(),) if use else ()
    return tmpl, GpuPod(scope, f"{id}-pod", containers=[Container(name="c", image=IMAGE, claims=claims)], **pod)


class _Prefixed(cdk8s.Chart):
    """A chart whose ``generate_object_name`` is Python's (jsii calls back for every object)."""

    def generate_object_name(self, api_object: cdk8s.ApiObject) -> str:
        return "pre-" + api_object.node.id


def test_charts_without_name_hashes_or_with_their_own_name_generator() -> None:
    app = _app()
    plain = cdk8s.Chart(app, "nohash", disable_resource_name_hashes=True)
    objs = [*_pair(plain, "a"), *_pair(plain, "b")]
    custom = _Prefixed(app, "custom")
    objs += [*_pair(custom, "a"), *_pair(custom, "b")]
    fast, slow, in_python = _both(app, *objs)
    assert fast == slow and in_python
    assert "name: nohash-a-pod\n" in fast and "name: pre-b-pod\n" in fast
    assert "resourceClaimTemplateName: pre-b-slice\n" in fast  # the pod's reference uses the same name


def test_generated_names_of_odd_ids_and_deep_or_nested_scopes() -> None:
    app = _app()
    chart = cdk8s.Chart(app, "c")
    objs: list[Any] = [GpuPod(chart, "first", containers=[Container(name="c", image=IMAGE)])]
    deep: constructs.Construct = chart
    for i in range(6):
        deep = constructs.Construct(deep, f"level-with-a-long-name-{i}")
    scopes = [(chart, ["Default", "Resource", "UPPER", "a.b", "a_b", "x" * 70, "a--b", "0"]), (deep, ["leaf", "leaf2"]),
              (constructs.Construct(cdk8s.Chart(app, "c2"), "Default"), ["Default", "inner"]),
              (constructs.Construct(cdk8s.Chart(app, "c3"), "Resource"), ["x"])]
    for scope, ids in scopes:
        objs += [GpuPod(scope, id, containers=[Container(name="c", image=IMAGE)]) for id in ids]
    objs.append(GpuPod(objs[0], "child-of-a-pod", containers=[Container(name="c", image=IMAGE)]))
    objs.append(GpuDeployment(chart, "d" + "y" * 70, containers=[Container(name="c", image=IMAGE)]))
    fast, slow, in_python = _both(app, *objs)
    assert fast == slow and in_python


class _LabelsLater(cdk8s.Chart):
    """A chart class whose labels and namespace are Python properties that change over time."""

    current: dict[str, str] = {}  # replaced per instance

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.current)

    @property
    def namespace(self) -> str | None:
        return self.current.get("ns")


def test_a_chart_overriding_labels_renders_through_cdk8s() -> None:
    app = _app()
    chart = _LabelsLater(app, "c")
    chart.current = {"when": "before", "ns": "early"}
    pod = GpuPod(chart, "p", containers=[Container(name="c", image=IMAGE)])  # cdk8s merges these now
    chart.current = {"when": "after", "ns": "late"}
    fast, slow, in_python = _both(app, pod)
    assert fast == slow and "when: before" in fast and "namespace: early" in fast  # before the fix: "after"
    assert not in_python


def test_nested_charts_plain_scopes_and_an_explicit_namespace() -> None:
    app = _app()
    outer = cdk8s.Chart(app, "outer", namespace="ns-out", labels={"level": "outer", "o": "1"})
    inner = cdk8s.Chart(outer, "inner", namespace="ns-in", labels={"level": "inner", "i": "2"})
    bare = cdk8s.Chart(inner, "bare")  # no labels/namespace: nothing is inherited from the parents
    group = constructs.Construct(inner, "group")
    objs = [*_pair(outer, "a"), *_pair(inner, "b", use=False, namespace="explicit", labels={"level": "mine"}),
            *_pair(bare, "c", use=False), *_pair(group, "d", use=False),
            *_pair(constructs.Construct(group, "deeper"), "e", use=False)]
    fast, slow, in_python = _both(app, *objs)
    assert fast == slow and in_python
    docs = {d["metadata"]["name"]: d["metadata"] for c in app.charts for d in c.to_json()}
    assert docs[objs[3].name] == {"labels": {"i": "2", "level": "mine"}, "name": objs[3].name, "namespace": "explicit"}
    assert "namespace" not in docs[objs[4].name] and "labels" not in docs[objs[4].name]
    assert docs[objs[7].name]["namespace"] == "ns-in"  # a plain Construct scope: the nearest chart's


def test_label_and_annotation_keys_javascript_orders_differently() -> None:
    app = _app()
    long_prefix = ".".join(["a" * 60] * 4)[:253].rstrip(".")
    labels = {f"{long_prefix}/{'n' * 63}": "v", "0": "zero", "7": "seven", "10": "ten", "007": "lead",
              "4294967294": "max-index", "4294967295": "not-an-index", "Z": "upper", "a": "", "a-b": "x", "a.b": "y"}
    annotations = {"b.example/x": "ünïcode ✓ \U0001F600", "1": "", "a" * 63: "l" * 5000,
                   "example.com/multi": "a\nb\n", "yes": "no", "n": "012"}
    chart = cdk8s.Chart(app, "c", labels={"10": "chart", "9": "chart", "z": "chart"})
    pod = GpuPod(chart, "p", labels=labels, annotations=annotations, containers=[Container(name="c", image=IMAGE)])
    fast, slow, in_python = _both(app, pod)
    assert fast == slow and in_python
    with cdk8s_rendering():
        slow_json = pod.to_json()
    assert list(pod.to_json()["metadata"]["labels"]) == list(slow_json["metadata"]["labels"])


def test_metadata_read_before_synth_hands_the_object_to_cdk8s() -> None:
    app = _app()
    chart = cdk8s.Chart(app, "c", labels={"team": "a"})
    tmpl, pod = _pair(chart, "w")
    assert pod.metadata.get_label("team") == "a"  # a read: cdk8s renders from now on, with the same result
    assert tmpl.metadata.name == tmpl.template_name
    fast, slow, _ = _both(app)
    assert fast == slow and tmpl._dra_manifest is None and pod._dra_manifest is None


def test_dependencies_between_library_and_foreign_objects_keep_cdk8s_order() -> None:
    app = _app()
    first = cdk8s.Chart(app, "first")
    second = cdk8s.Chart(app, "second")
    cm = cdk8s.ApiObject(first, "cm", api_version="v1", kind="ConfigMap")
    tmpl, pod = _pair(first, "w")
    job = GpuJob(second, "job", containers=[Container(name="c", image=IMAGE)])
    pod.add_dependency(cm)  # pod after cm
    cm.add_dependency(tmpl)  # cm after the template
    first.add_dependency(second)  # the chart of the job first
    job.add_dependency(cdk8s.ApiObject(second, "sa", api_version="v1", kind="ServiceAccount"))
    fast, slow, in_python = _both(app, tmpl, pod, job)
    assert fast == slow and in_python
    kinds = [line[6:] for line in fast.splitlines() if line.startswith("kind: ")]
    assert kinds == ["ServiceAccount", "Job", "ResourceClaimTemplate", "ConfigMap", "Pod"]


def _build_for_files(app: cdk8s.App) -> None:
    set_kubernetes_version(app, "1.34")
    a = cdk8s.Chart(app, "a", namespace="ns-a", labels={"x": "1"})
    b = cdk8s.Chart(app, "b")
    _pair(a, "w")
    GpuDeployment(b, "web", replicas=2, containers=[Container(name="c", image=IMAGE)])
    cdk8s.ApiObject(b, "cm", api_version="v1", kind="ConfigMap")
    a.add_dependency(b)  # indexed file names


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("output", list(cdk8s.YamlOutputType), ids=lambda t: t.name)
def test_every_yaml_output_type_writes_the_same_files(output: cdk8s.YamlOutputType, tmp_path: Path) -> None:
    results = []
    for mode in ("python", "cdk8s"):
        app = cdk8s.App(outdir=str(tmp_path / mode), yaml_output_type=output, record_construct_metadata=True)
        _build_for_files(app)
        if mode == "cdk8s":
            with cdk8s_rendering():
                app.synth()
        else:
            app.synth()
        results.append(_files(tmp_path / mode))
    assert results[0] == results[1] and results[0]


def test_testing_synth_and_synth_yaml_twice() -> None:
    app = _app()
    chart = cdk8s.Chart(app, "c", namespace="n")
    tmpl, pod = _pair(chart, "w")
    first, second = app.synth_yaml(), app.synth_yaml()
    fast = cdk8s.Testing.synth(chart)
    assert tmpl._dra_manifest is not None and pod._dra_manifest is not None
    with cdk8s_rendering():
        slow = cdk8s.Testing.synth(chart)
        assert first == second == app.synth_yaml()
    assert fast == slow


def test_include_and_hand_written_objects_in_the_same_chart(tmp_path: Path) -> None:
    manifest = tmp_path / "extra.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: included\ndata:\n  b: '1'\n  a: '2'\n"
                        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  labels: {z: '1', a: '2'}\n")
    app = _app()
    chart = cdk8s.Chart(app, "c", labels={"team": "t"}, namespace="n")
    tmpl, pod = _pair(chart, "before")
    cdk8s.Include(chart, "inc", url=str(manifest))
    cdk8s.ApiObject(chart, "hand", api_version="v1", kind="Service", metadata={"labels": {"b": "1", "a": "2"}})
    later = _pair(chart, "after")
    fast, slow, in_python = _both(app, tmpl, pod, *later)
    assert fast == slow and in_python
    names = [d["metadata"]["name"] for d in chart.to_json()]
    assert [d["metadata"]["name"] for d in chart_manifests(chart, app)] == names


def test_json_patches_on_metadata_and_on_deferred_fields() -> None:
    app = _app()
    chart = cdk8s.Chart(app, "c", labels={"team": "t"}, namespace="n")
    pods = [_pair(chart, f"p{i}", use=i != 1, labels={"a": "1"}, annotations={"k": "v"})[1] for i in range(6)]
    pods[0].add_json_patch(cdk8s.JsonPatch.remove("/metadata/labels/team"))
    pods[1].add_json_patch(cdk8s.JsonPatch.replace("/metadata/namespace", "other"),
                           cdk8s.JsonPatch.add("/metadata/annotations/new", "x"))
    pods[2].add_json_patch(cdk8s.JsonPatch.remove("/metadata/annotations"))
    pods[3].add_json_patch(cdk8s.JsonPatch.replace("/spec/containers/0/image", "other/b:2"),
                           cdk8s.JsonPatch.add("/spec/hostname", "h"))
    pods[4].add_json_patch(cdk8s.JsonPatch.add("/status", {"phase": "Pending"}))
    pods[5].add_json_patch(cdk8s.JsonPatch.remove("/spec/terminationGracePeriodSeconds"),
                           cdk8s.JsonPatch.add("/spec/terminationGracePeriodSeconds", 30))
    fast, slow, _ = _both(app)
    assert fast == slow
    docs = [d for d in cdk8s.Testing.synth(chart) if d["kind"] == "Pod"]
    assert "team" not in docs[0]["metadata"]["labels"] and docs[1]["metadata"]["namespace"] == "other"
    assert "annotations" not in docs[2]["metadata"] and docs[3]["spec"]["hostname"] == "h"
    assert list(docs[4]) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert docs[5]["spec"]["terminationGracePeriodSeconds"] == 30


def test_suppress_admission_policy_and_attach_claims_next_to_library_objects() -> None:
    app = _app()
    chart = cdk8s.Chart(app, "c", namespace="n")
    tmpl, pod = _pair(chart, "w")
    batch = GpuPod(chart, "batch", containers=[Container(name="c", image=IMAGE)])
    suppress(batch, "DRA008", reason="batch pod, nothing to drain")
    deployment = kplus.Deployment(chart, "plus", containers=[kplus.ContainerProps(name="main", image=IMAGE)])
    attach_claims(deployment, {"main": tmpl})  # a cdk8s-plus workload referencing a library template
    GuardrailsAdmissionPolicy(cdk8s.Chart(app, "cluster"), "policy")
    fast, slow, in_python = _both(app, tmpl, pod)
    assert fast == slow and in_python and batch._dra_manifest is None  # suppress() wrote its metadata
    assert f"resourceClaimTemplateName: {tmpl.template_name}" in fast.split("kind: Deployment")[1]


@pytest.mark.parametrize("name", ["two_tenants_kueue", "two_tenants_with_sanitizer"])
def test_tenants_and_sanitizer_with_library_objects_touched_by_them(name: str) -> None:
    app = _app()
    [example] = [e for e in MAIN.EXAMPLES if e.__name__ == name]
    charts = example.build(app)
    for chart in charts:
        for child in chart.node.find_all():
            if isinstance(child, GpuPod | GpuDeployment | GpuJob):
                child.add_dependency(charts[-1])  # a library object depending on another chart's objects
    fast, slow, _ = _both(app)
    assert fast == slow


class _ZeroGrace(GpuPod):
    """A user's subclass rewriting the rendered document."""

    def to_json(self) -> Any:
        doc = super().to_json()
        doc["spec"]["terminationGracePeriodSeconds"] = 0
        return doc


def test_a_subclass_overriding_to_json_is_what_the_guardrails_check() -> None:
    for rendering in (False, True):
        app = _app()
        chart = cdk8s.Chart(app, "c")
        tmpl = GpuClaimTemplate.mig(chart, "s", gpu="A100_80GB", profile="3g.40gb")
        _ZeroGrace(chart, "p", containers=[Container(name="c", image=IMAGE, claims=(tmpl.use(),))])
        with pytest.raises(GuardrailsError, match="DRA008"):  # before the fix: synthesized with grace 0 silently
            if rendering:
                with cdk8s_rendering():
                    app.synth_yaml()
            else:
                app.synth_yaml()


def test_a_subclass_overriding_to_json_renders_the_same() -> None:
    class Annotated(GpuPod):
        def to_json(self) -> Any:
            doc = super().to_json()
            doc["metadata"].setdefault("annotations", {})["rendered-by"] = "subclass"
            return doc

    app = _app()
    pod = Annotated(cdk8s.Chart(app, "c", labels={"a": "b"}), "p", containers=[Container(name="c", image=IMAGE)])
    fast, slow, in_python = _both(app, pod)
    assert fast == slow and "rendered-by: subclass" in fast and in_python


def test_super_metadata_in_a_subclass_reaches_the_output() -> None:
    class Labelled(GpuPod):
        def __init__(self, scope: constructs.Construct, id: str, **kwargs: Any) -> None:
            super().__init__(scope, id, **kwargs)
            super().metadata.add_label("sub", "yes")  # bypassed __getattribute__: the label was lost

    app = _app()
    Labelled(cdk8s.Chart(app, "c"), "p", containers=[Container(name="c", image=IMAGE)])
    fast, slow, _ = _both(app)
    assert fast == slow and 'sub: "yes"' in fast


def test_cdk8s_apiobject_members_called_unbound_reach_the_output() -> None:
    app = _app()
    chart = cdk8s.Chart(app, "c")
    patched = GpuPod(chart, "patched", containers=[Container(name="c", image=IMAGE)])
    labelled = GpuPod(chart, "labelled", containers=[Container(name="c", image=IMAGE)])
    cdk8s.ApiObject.add_json_patch(patched, cdk8s.JsonPatch.add("/spec/hostname", "h"))  # was lost in Python
    cdk8s.ApiObject.metadata.fget(labelled).add_label("lbl", "set")  # type: ignore[attr-defined]
    fast, slow, _ = _both(app)
    assert fast == slow and "hostname: h" in fast and "lbl: set" in fast


def test_resolvers_defaults_passed_explicitly_render_in_python() -> None:
    app = _app(resolvers=[cdk8s.LazyResolver(), cdk8s.ImplicitTokenResolver(), cdk8s.NumberStringUnionResolver()])
    tmpl, pod = _pair(cdk8s.Chart(app, "c", labels={"x": "y"}), "w")
    fast, slow, in_python = _both(app, tmpl, pod)
    assert fast == slow and in_python


def test_a_python_subclass_of_a_default_resolver_renders_through_cdk8s() -> None:
    class Shout(cdk8s.LazyResolver):
        def resolve(self, context: cdk8s.ResolutionContext) -> None:
            if context.value == "shout":
                context.replace_value("SHOUT")

    app = _app(resolvers=[Shout()])
    GpuPod(cdk8s.Chart(app, "c"), "p", labels={"a": "shout"}, containers=[Container(name="c", image=IMAGE)])
    fast, slow, _ = _both(app)
    assert fast == slow and "a: SHOUT" in fast  # before the fix: isinstance passed, Python kept "shout"


def test_a_chart_outside_an_app_fails_as_cdk8s_fails() -> None:
    root = constructs.RootConstruct("")
    set_kubernetes_version(root, "1.34")
    chart = cdk8s.Chart(root, "c")
    GpuPod(chart, "p", containers=[Container(name="c", image=IMAGE)])
    for rendering in (False, True):  # before the fix: Python rendered what cdk8s refuses
        with pytest.raises(RuntimeError, match="resolvers is not iterable"):
            if rendering:
                with cdk8s_rendering():
                    chart.to_json()
            else:
                chart.to_json()


def test_an_error_in_to_json_surfaces_and_the_kernel_keeps_working() -> None:
    class Broken(GpuPod):
        def to_json(self) -> Any:
            raise ValueError("broken rendering of this pod")

    app = _app()
    Broken(cdk8s.Chart(app, "c"), "p", containers=[Container(name="c", image=IMAGE)])
    for rendering in (False, True, False):
        with pytest.raises(RuntimeError, match="broken rendering of this pod"):
            if rendering:
                with cdk8s_rendering():
                    app.synth_yaml()
            else:
                app.synth_yaml()
    other = _app()
    _pair(cdk8s.Chart(other, "c"), "w")
    assert other.synth_yaml().count("kind: ") == 2


def test_a_value_python_would_hand_over_as_is_renders_through_cdk8s() -> None:
    app = _app()
    when = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    pod = GpuPod(cdk8s.Chart(app, "c"), "p", containers=[Container(name="c", image=IMAGE)],
                 extra_spec={"overhead": {"when": when, "size": cdk8s.Size.gibibytes(1)}})
    assert pod._dra_manifest is None  # handed to cdk8s at construction
    fast, slow, _ = _both(app)
    assert fast == slow  # before the fix: "when: 2024-01-02T03:04:05" unquoted
    assert 'when: "2024-01-02T03:04:05.000Z"' in fast


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_number_without_json_form_is_refused_at_construction(value: float) -> None:
    chart = cdk8s.Chart(_app(), "c")
    with pytest.raises(DraConstructsError, match=r"c/p: spec\.overhead\.x\[0\]=.*not a JSON number"):
        GpuPod(chart, "p", containers=[Container(name="c", image=IMAGE)], extra_spec={"overhead": {"x": [value]}})


def test_values_that_are_json_render_in_python() -> None:
    app = _app()
    pod = GpuPod(cdk8s.Chart(app, "c"), "p", containers=[Container(name="c", image=IMAGE)],
                 extra_spec={"overhead": {"t": ["a", "b"], "f": 1.0, "g": 2.5, "b": True, "n": None, "e": {}, "l": [],
                                          "big": 2**60, "u": "ünï", "s": "yes", "o": "012"}})
    fast, slow, in_python = _both(app, pod)
    assert fast == slow and in_python


_DISABLE_SORT_SCRIPT = """
import os, cdk8s
from dra_constructs import Container, GpuPod
from dra_constructs.constructs._rendered import cdk8s_rendering
del os.environ["CDK8S_DISABLE_SORT"]  # Node keeps the variable it started with
app = cdk8s.Testing.app()
GpuPod(cdk8s.Chart(app, "c", labels={"z": "1"}), "p", labels={"b": "1", "a": "2"},
       containers=[Container(name="c", image="registry.example/a:1")])
fast = app.synth_yaml()
with cdk8s_rendering():
    slow = app.synth_yaml()
print(fast == slow, fast.index("a: ") < fast.index("b: ") < fast.index("z: "))
"""


def test_cdk8s_disable_sort_set_when_node_started_is_honoured() -> None:
    env = {**os.environ, "CDK8S_DISABLE_SORT": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", _DISABLE_SORT_SCRIPT], env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    # cdk8s sorts metadata keys even then (ApiObjectMetadataDefinition.toJson ignores the variable)
    assert out.stdout.split() == ["True", "True"]


@jsii.implements(cdk8s.IResolver)
class _Noop:
    def resolve(self, context: cdk8s.ResolutionContext) -> None:
        return None


def test_a_foreign_resolver_falls_back_even_when_it_changes_nothing() -> None:
    app = _app(resolvers=[_Noop()])
    tmpl, pod = _pair(cdk8s.Chart(app, "c"), "w")
    fast = app.synth_yaml()
    assert tmpl._dra_manifest is None and pod._dra_manifest is None
    with cdk8s_rendering():
        assert fast == app.synth_yaml()


def test_a_key_jsii_cannot_send_is_refused_at_construction() -> None:
    chart = cdk8s.Chart(_app(), "c")
    with pytest.raises(DraConstructsError, match=r"c/p: spec\.overhead\.'__proto__'=.*jsii cannot pass"):
        GpuPod(chart, "p", containers=[Container(name="c", image=IMAGE)], extra_spec={"overhead": {"__proto__": "1"}})


def test_a_refused_hand_over_keeps_the_deferred_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app()
    _, pod = _pair(cdk8s.Chart(app, "c"), "w")

    def refuse(path: str, value: Any) -> cdk8s.JsonPatch:
        raise RuntimeError("jsii refused the value")

    with monkeypatch.context() as patched:
        patched.setattr(cdk8s.JsonPatch, "add", refuse)
        with pytest.raises(RuntimeError, match="refused"):
            pod.metadata.add_label("x", "y")
    # before the fix: the spec was gone, and the next synth wrote the pod without it
    assert "resourceClaimTemplateName" in pod.to_json()["spec"]["resourceClaims"][0]
    pod.metadata.add_label("lbl", "set")
    fast, slow, _ = _both(app)
    assert fast == slow and "resourceClaims:" in fast and "lbl: set" in fast
