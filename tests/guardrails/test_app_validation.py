"""Synth-time guardrails: every API object of a cdk8s App, however it was built."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import cdk8s
import cdk8s_plus_28 as kplus
import pytest

from dra_constructs import Target, set_kubernetes_version
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import (
    SUPPRESSIONS_ANNOTATION,
    audit,
    ensure_guardrails,
    load_paths,
    suppress,
    validate_app,
)

from .helpers import gpu_pod_spec

REPO = Path(__file__).resolve().parents[2]


def _app(tmp_path: Path) -> tuple[cdk8s.App, cdk8s.Chart]:
    app = cdk8s.App(outdir=str(tmp_path / "dist"))
    chart = cdk8s.Chart(app, "workloads", namespace="ml")
    ensure_guardrails(chart)
    return app, chart


def _api_object(chart: cdk8s.Chart, id: str, kind: str, spec: dict[str, Any], **metadata: Any) -> cdk8s.ApiObject:
    obj = cdk8s.ApiObject(chart, id, api_version="v1", kind=kind, metadata=cdk8s.ApiObjectMetadata(**metadata))
    obj.add_json_patch(cdk8s.JsonPatch.add("/spec", spec))
    return obj


UNSAFE = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
          "terminationGracePeriodSeconds": 30}


def test_synth_and_synth_yaml_fail_on_a_hand_built_object(tmp_path: Path) -> None:
    app, chart = _app(tmp_path)
    _api_object(chart, "unsafe", "Pod", UNSAFE, name="llm")
    for synth in (app.synth, app.synth_yaml):
        with pytest.raises(RuntimeError) as raised:
            synth()
        message = str(raised.value)
        assert "[DRA001] Pod/ml/llm (construct workloads/unsafe)" in message
        assert "spec.containers[0].resources.limits['nvidia.com/gpu']" in message and "Fix:" in message
    assert not (tmp_path / "dist").exists() or not any((tmp_path / "dist").iterdir())


def test_cdk8s_plus_objects_are_checked(tmp_path: Path) -> None:
    app, chart = _app(tmp_path)
    kplus.Deployment(chart, "legacy", containers=[kplus.ContainerProps(
        image="nvcr.io/nvidia/pytorch:24.08-py3",
        env_variables={"CUDA_VISIBLE_DEVICES": kplus.EnvValue.from_value("0")},
    )])
    [finding] = [f for f in validate_app(app) if f.severity.value == "error"]
    assert finding.rule == "DRA002" and finding.kind == "Deployment"
    with pytest.raises(RuntimeError, match=r"\[DRA002\] Deployment/ml/"):
        app.synth_yaml()


def test_suppression_is_written_to_the_yaml_and_honoured(tmp_path: Path) -> None:
    app, chart = _app(tmp_path)
    deployment = kplus.Deployment(chart, "legacy", containers=[kplus.ContainerProps(
        image="x", env_variables={"CUDA_VISIBLE_DEVICES": kplus.EnvValue.from_value("0")})])
    suppress(deployment, "DRA002", reason="migration to DRA tracked in PLAT-77")
    obj = _api_object(chart, "unsafe", "Pod", UNSAFE, name="llm")
    suppress(obj, "DRA001", reason="device-plugin node pool until Q3")
    suppress(obj, "DRA008", reason="batch job, no checkpointing")
    text = app.synth_yaml()
    assert text.count(SUPPRESSIONS_ANNOTATION) == 2
    assert '{"rule": "DRA001", "reason": "device-plugin node pool until Q3"}' in text
    assert validate_app(app) == []
    app.synth()
    assert (tmp_path / "dist" / "workloads.k8s.yaml").read_text().count("PLAT-77") == 1


@pytest.mark.parametrize(("rule", "reason", "field"), [
    ("DRA001", "", "reason"), ("DRA001", "   ", "reason"), ("DRA042", "why", "rule"), ("DRA000", "why", "rule")])
def test_suppression_needs_a_known_rule_and_a_reason(tmp_path: Path, rule: str, reason: str, field: str) -> None:
    _, chart = _app(tmp_path)
    obj = _api_object(chart, "unsafe", "Pod", UNSAFE, name="llm")
    with pytest.raises(DraConstructsError) as raised:
        suppress(obj, rule, reason=reason)
    assert raised.value.field == field and raised.value.path == "workloads/unsafe"


def test_suppress_needs_an_api_object(tmp_path: Path) -> None:
    _, chart = _app(tmp_path)
    with pytest.raises(DraConstructsError, match="no single ApiObject child"):
        suppress(chart, "DRA001", reason="x")


def test_ensure_guardrails_is_idempotent_and_version_checked(tmp_path: Path) -> None:
    app, chart = _app(tmp_path)
    for _ in range(3):
        ensure_guardrails(chart)
    ensure_guardrails(app, kubernetes_version="1.33")
    ensure_guardrails(chart, kubernetes_version="1.33")
    with pytest.raises(DraConstructsError, match=r"already check against Kubernetes 1\.33"):
        ensure_guardrails(chart, kubernetes_version="1.34")
    _api_object(chart, "unsafe", "Pod", UNSAFE, name="llm")
    with pytest.raises(RuntimeError) as raised:
        app.synth_yaml()
    assert str(raised.value).count("[DRA001]") == 1


def test_target_comes_from_the_app_context(tmp_path: Path) -> None:
    app = cdk8s.App(outdir=str(tmp_path / "dist"))
    set_kubernetes_version(app, "1.32.0")  # 1.32.0-1.32.2 refuse string functions on attributes
    chart = cdk8s.Chart(app, "c", namespace="ml")
    ensure_guardrails(chart)
    template = cdk8s.ApiObject(chart, "t", api_version="resource.k8s.io/v1beta1", kind="ResourceClaimTemplate",
                               metadata=cdk8s.ApiObjectMetadata(name="t"))
    expression = ("device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$') && "
                  "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'")
    template.add_json_patch(cdk8s.JsonPatch.add("/spec", {"spec": {"devices": {"requests": [{
        "name": "gpu", "deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": expression}}]}]}}}))
    assert {f.rule for f in validate_app(app)} == {"DRA004"}
    assert validate_app(app, kubernetes_version="1.32.3") == []


def test_warnings_go_to_stderr_and_do_not_fail(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    app, chart = _app(tmp_path)
    spec = gpu_pod_spec()
    del spec["terminationGracePeriodSeconds"]
    _api_object(chart, "pod", "Pod", spec, name="p")
    app.synth_yaml()
    assert "dra-constructs guardrails: warning [DRA008] Pod/ml/p (construct workloads/pod)" in capfd.readouterr().err


def _examples() -> list[Any]:
    sys.path.insert(0, str(REPO / "examples"))
    try:
        names = sorted(p.stem for p in (REPO / "examples").glob("*.py") if p.stem != "main")
        return [importlib.import_module(name) for name in names]
    finally:
        sys.path.remove(str(REPO / "examples"))


def test_library_examples_pass_without_findings(tmp_path: Path) -> None:
    examples = _examples()
    assert len(examples) >= 4
    # Each example is its own manifest set (its own App), as examples/main.py synthesizes them.
    for version in ("1.32", "1.34"):
        for example in examples:
            oldest = getattr(example, "MIN_KUBERNETES_VERSION", None)
            if oldest is not None and Target.parse(version).minor < Target.parse(oldest).minor:
                continue
            app = cdk8s.App(outdir=str(tmp_path / version / example.__name__))
            set_kubernetes_version(app, version)
            example.build(app)
            ensure_guardrails(app)
            assert validate_app(app) == [], example.__name__
            app.synth()


def test_two_tenants_need_the_sanitizer_chart(tmp_path: Path) -> None:
    [example] = [e for e in _examples() if e.__name__ == "two_tenants_with_sanitizer"]
    app = cdk8s.App(outdir=str(tmp_path))
    example.build(app)
    app.synth()
    files = sorted(tmp_path.glob("*.k8s.yaml"))
    assert audit(load_paths([str(f) for f in files])).findings == ()
    without = [str(f) for f in files if "dra-constructs.io/component: sanitizer" not in f.read_text()]
    assert len(without) == len(files) - 1
    result = audit(load_paths(without))
    assert {f.rule for f in result.findings} == {"DRA009"}
    [finding] = result.findings  # one finding about the manifest set (issue 25), naming both tenants' objects
    assert {obj.split("/")[1] for obj in finding.sample} == {"team-a", "team-b"}


def test_synth_as_cdk8s_cli_runs_it(tmp_path: Path) -> None:
    """``cdk8s synth`` runs the app command with CDK8S_OUTDIR; the process must fail with our message."""
    app_py = tmp_path / "main.py"
    app_py.write_text(textwrap.dedent("""
        import cdk8s
        from dra_constructs.guardrails import ensure_guardrails
        app = cdk8s.App()
        chart = cdk8s.Chart(app, "c")
        ensure_guardrails(chart)
        pod = cdk8s.ApiObject(chart, "p", api_version="v1", kind="Pod", metadata={"name": "p"})
        pod.add_json_patch(cdk8s.JsonPatch.add("/spec", {"containers": [{"name": "c", "env": [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}))
        app.synth()
    """))
    env = {**os.environ, "CDK8S_OUTDIR": str(tmp_path / "out"), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    proc = subprocess.run([sys.executable, str(app_py)], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode != 0
    assert "[DRA002] Pod/default/p (construct c/p)" in proc.stderr
    assert not (tmp_path / "out" / "c.k8s.yaml").exists()


def test_one_rule_run_per_synth_and_fresh_runs_for_later_synths(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import dra_constructs.constructs.guardrails as app_validation

    runs: list[int] = []
    real_run = app_validation._run

    def counting(*args: Any, **kwargs: Any) -> Any:
        runs.append(1)
        return real_run(*args, **kwargs)

    monkeypatch.setattr(app_validation, "_run", counting)
    app = cdk8s.App(outdir=str(tmp_path / "dist"))
    for i in range(3):  # App.synth validates once, then once more per chart
        chart = cdk8s.Chart(app, f"chart{i}", namespace="ml")
        _api_object(chart, "pod", "Pod", {"containers": [{"name": "c"}]}, name=f"p{i}")
    ensure_guardrails(chart)
    app.synth()
    app.synth_yaml()
    assert len(runs) == 2
    _api_object(chart, "late", "Pod", UNSAFE, name="late")  # changed after a synth: seen by the next one
    with pytest.raises(RuntimeError, match=r"\[DRA001\] Pod/ml/late"):
        app.synth_yaml()
    assert len(runs) == 3
