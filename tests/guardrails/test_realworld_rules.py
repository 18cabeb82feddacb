"""Guardrails against real manifests: DRA-served extended resources, version gating, skipped input, deep CRDs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cdk8s
import pytest
from sarif_kit.validate import validation_errors

from dra_constructs.cli import main
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import Manifest, audit, ensure_guardrails, load_paths, validate_app
from dra_constructs.guardrails.skipped import SkippedInput
from dra_constructs.target import DRA_FIELDS, Target

from .helpers import FIXTURES, pod


def _limits(name: str) -> dict[str, Any]:
    return pod({"terminationGracePeriodSeconds": 60,
                "containers": [{"name": "app", "image": "x", "resources": {"limits": {name: 1}}}]})


def _rules(objects: list[dict[str, Any]], version: str, **kwargs: Any) -> set[tuple[str, str]]:
    return {(f.rule, f.severity.value) for f in audit(objects, kubernetes_version=version, **kwargs).findings}


# --- target facts -------------------------------------------------------------------------------

def test_target_knows_when_each_field_and_version_arrived() -> None:
    t32, t34, t36 = Target.parse("1.32"), Target.parse("1.34"), Target.parse("1.36")
    assert not t32.has_dra_field("request.firstAvailable") and Target.parse("1.33").has_dra_field(
        "request.firstAvailable")
    for field in ("request.capacity", "deviceClass.extendedResourceName", "device.bindingConditions"):
        assert not t32.has_dra_field(field) and t34.has_dra_field(field)
    assert t34.has_dra_field("deviceTaintRule.deviceSelector.selectors")
    assert not Target.parse("1.35").has_dra_field("deviceTaintRule.deviceSelector.selectors")
    assert t32.api_version_fact("resource.k8s.io/v1", "ResourceClaim").introduced == 34  # type: ignore[union-attr]
    assert not t32.dra_extended_resources_exist and t34.dra_extended_resources_exist
    assert not t34.has_dra_extended_resources and t36.has_dra_extended_resources  # on by default
    assert not t34.dra_extended_resources_on_by_default and t36.dra_extended_resources_on_by_default
    assert DRA_FIELDS["request.capacity"].describe() == "added in 1.34 (DRAConsumableCapacity; on by default from 1.36)"


# --- DRA001 / DRA010 ----------------------------------------------------------------------------

def test_implicit_name_is_dra_from_134_and_device_plugin_before() -> None:
    implicit = _limits("deviceclass.resource.kubernetes.io/gpu.nvidia.com")
    assert _rules([implicit], "1.36") == {("DRA010", "warning")}
    assert _rules([implicit], "1.33") == {("DRA001", "error")}
    [finding] = audit([implicit], kubernetes_version="1.34").findings
    assert "DRAExtendedResource feature gate" in finding.message  # alpha in 1.34-1.35


def test_declared_mapping_turns_dra001_into_dra010() -> None:
    gpu = _limits("nvidia.com/gpu")
    assert _rules([gpu], "1.36") == {("DRA001", "error")}
    declared = audit([gpu], kubernetes_version="1.36", dra_extended_resources=["nvidia.com/gpu=gpu.nvidia.com"])
    [finding] = declared.findings
    assert finding.rule == "DRA010" and "'gpu.nvidia.com'" in finding.message and "device plugin" in finding.message
    assert "--dra-extended-resource" in audit([gpu], kubernetes_version="1.36").findings[0].fix
    with pytest.raises(DraConstructsError, match=r"1\.34"):
        audit([gpu], kubernetes_version="1.32", dra_extended_resources={"nvidia.com/gpu": "gpu.nvidia.com"})
    with pytest.raises(DraConstructsError, match="NAME=CLASS"):
        audit([gpu], kubernetes_version="1.36", dra_extended_resources=["nvidia.com/gpu"])


def test_a_class_that_pins_the_profile_is_not_unpinned() -> None:
    objects = [m.obj for m in load_paths([str(FIXTURES / "compliant" / "dra-extended-resource-class.yaml")])]
    findings = audit(objects, kubernetes_version="1.36").findings
    expected = [("DRA010", "spec.containers[0].resources.limits['example.com/gpu']")]
    assert [(f.rule, f.path) for f in findings] == expected


def test_cli_flag_and_its_version_gate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(json.dumps(_limits("nvidia.com/gpu")))
    assert main(["audit", "--kubernetes-version", "1.36", str(path)]) == 1
    assert main(["audit", "--kubernetes-version", "1.36", "--dra-extended-resource", "nvidia.com/gpu=gpu.nvidia.com",
                 str(path)]) == 0
    capsys.readouterr()
    assert main(["audit", "--kubernetes-version", "1.32", "--dra-extended-resource", "nvidia.com/gpu=gpu.nvidia.com",
                 str(path)]) == 2
    assert "KEP-5004" in capsys.readouterr().err


def test_synth_time_declaration() -> None:
    from dra_constructs import set_dra_extended_resources, set_kubernetes_version

    app = cdk8s.Testing.app()
    set_kubernetes_version(app, "1.36")
    set_dra_extended_resources(app, {"nvidia.com/gpu": "gpu.nvidia.com"})
    chart = cdk8s.Chart(app, "c")
    obj = cdk8s.ApiObject(chart, "p", api_version="v1", kind="Pod",
                          metadata=cdk8s.ApiObjectMetadata(name="p", namespace="ml"))
    obj.add_json_patch(cdk8s.JsonPatch.add("/spec", _limits("nvidia.com/gpu")["spec"]))
    ensure_guardrails(chart)
    assert {f.rule for f in validate_app(app)} == {"DRA010"}
    old = cdk8s.Testing.app()
    with pytest.raises(DraConstructsError, match=r"1\.34"):
        set_dra_extended_resources(old, {"nvidia.com/gpu": "gpu.nvidia.com"})


# --- DRA001 in custom kinds ---------------------------------------------------------------------

def test_pod_spec_at_any_depth_without_recursion() -> None:
    node: dict[str, Any] = {"template": {"spec": _limits("nvidia.com/gpu")["spec"]}}
    for i in range(3000):  # far beyond Python's recursion limit
        node = {f"l{i}": node}
    obj = {"apiVersion": "example.com/v1", "kind": "Deep", "metadata": {"name": "d"}, "spec": node}
    m = Manifest(obj)
    assert len(m.pods) == 1 and m.pods[0].path.endswith(".template.spec")
    assert {f.rule for f in audit([obj]).findings} == {"DRA001"}


def test_resources_outside_pod_specs_but_not_claim_capacity() -> None:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
           "spec": {"trainer": {"resourcesPerNode": {"requests": {"amd.com/gpu": 2}}}}}
    [finding] = audit([job]).findings
    assert finding.path == "spec.trainer.resourcesPerNode.requests['amd.com/gpu']"
    exactly = {"deviceClassName": "gpu.example.com", "capacity": {"requests": {"gpu.example.com/memory": "4Gi"}}}
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "c"},
             "spec": {"spec": {"devices": {"requests": [{"name": "r", "exactly": exactly}]}}}}
    assert "DRA001" not in {f.rule for f in audit([claim], kubernetes_version="1.36").findings}


# --- DRA002 -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "value", "flagged"), [
    ("NVIDIA_VISIBLE_DEVICES", "void", False), ("NVIDIA_VISIBLE_DEVICES", "none", False),
    ("NVIDIA_MIG_CONFIG_DEVICES", "all", False), ("NVIDIA_MIG_MONITOR_DEVICES", "all", False),
    ("NVIDIA_VISIBLE_DEVICES", "all", True), ("NVIDIA_VISIBLE_DEVICES", "GPU-1234", True),
    ("CUDA_VISIBLE_DEVICES", "0,1", True), ("CUDA_VISIBLE_DEVICES", "", False),
])
def test_only_variables_that_select_devices_are_dra002(name: str, value: str, flagged: bool) -> None:
    obj = pod({"containers": [{"name": "c", "image": "x", "env": [{"name": name, "value": value}]}]})
    assert ("DRA002" in {f.rule for f in audit([obj]).findings}) is flagged


# --- DRA011 -------------------------------------------------------------------------------------

def test_deprecated_versions_name_the_removal_release() -> None:
    template = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "ml"}, "spec": {"spec": {"devices": {"requests": []}}}}
    assert "DRA011" not in {f.rule for f in audit([template], kubernetes_version="1.35").findings}
    [finding] = [f for f in audit([template], kubernetes_version="1.36").findings if f.rule == "DRA011"]
    assert finding.severity.value == "warning" and "removed in 1.39" in finding.message
    rule = {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "selectors": []},
                     "taint": {"key": "k", "effect": "None"}}}
    at32 = audit([rule], kubernetes_version="1.32").findings
    assert any("has no DeviceTaintRule" in f.fix for f in at32)
    assert {f.path for f in audit([rule], kubernetes_version="1.34").findings} == {"spec.taint.effect"}
    at36 = {(f.path, f.severity.value) for f in audit([rule], kubernetes_version="1.36").findings}
    assert at36 == {("apiVersion", "warning"), ("spec.deviceSelector.selectors", "error")}


def test_version_gated_fixture_names_each_field() -> None:
    manifests = load_paths([str(FIXTURES / "noncompliant" / "version-gated-fields.yaml")])
    paths = {f.path for f in audit(manifests, kubernetes_version="1.32").findings if f.rule == "DRA011"}
    assert paths == {"apiVersion", "spec.spec.devices.requests[0].firstAvailable", "spec.extendedResourceName",
                     "spec.devices[0].basic.bindsToNode", "spec.devices[0].basic.bindingConditions"}
    assert not [f for f in audit(manifests, kubernetes_version="1.36").errors if f.rule == "DRA011"]


# --- skipped input ------------------------------------------------------------------------------

HELM = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: {{ include \"x.fullname\" . }}\n"
KUSTOMIZATION = "resources:\n- pod.yaml\npatches:\n- path: patch.yaml\n"
VALUES = "image:\n  repository: nvcr.io/nvidia/x\nreplicas: 2\n"
PATCH = "- op: replace\n  path: /spec/replicas\n  value: 3\n"


def _project(tmp_path: Path) -> Path:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "sa.yaml").write_text(HELM)
    (tmp_path / "kustomization.yaml").write_text(KUSTOMIZATION)
    (tmp_path / "overlay.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
    (tmp_path / "values.yaml").write_text(VALUES)
    (tmp_path / "patch.yaml").write_text(PATCH)
    (tmp_path / "pod.yaml").write_text(json.dumps(_limits("nvidia.com/gpu")))
    return tmp_path


def test_loader_reports_non_manifests_as_skipped(tmp_path: Path) -> None:
    project = _project(tmp_path)
    skipped: list[SkippedInput] = []
    manifests = load_paths([str(project)], skipped=skipped)
    assert [m.kind for m in manifests] == ["Pod"]
    by_file = {Path(s.file).name: s for s in skipped}
    assert set(by_file) == {"sa.yaml", "kustomization.yaml", "overlay.yaml", "values.yaml", "patch.yaml"}
    assert "helm template" in by_file["sa.yaml"].hint and by_file["sa.yaml"].line == 4
    assert all("kustomize build" in by_file[n].hint for n in ("kustomization.yaml", "overlay.yaml", "patch.yaml"))
    with pytest.raises(DraConstructsError):  # without the list: the old contract (exit 2)
        load_paths([str(project)])


def test_audit_of_a_project_reports_findings_and_skips(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    project = _project(tmp_path)
    assert main(["audit", "--format", "json", str(project)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [f["rule"] for f in report["findings"]] == ["DRA001"]
    assert len(report["skipped"]) == 5 and {"file", "line", "reason", "hint"} <= set(report["skipped"][0])
    assert main(["audit", str(project / "templates")]) == 2  # nothing left to audit
    captured = capsys.readouterr()
    assert "skipped: a Helm / Go template" in captured.out and "nothing to audit" in captured.err


def test_malformed_file_is_reported_and_the_rest_still_audited(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    project = _project(tmp_path)
    (project / "broken.yaml").write_text("kind: Pod\nmetadata: {name: no-api-version}\n")
    assert main(["audit", str(project)]) == 2
    captured = capsys.readouterr()
    assert "DRA001" in captured.out and "broken.yaml:1" in captured.err and "Traceback" not in captured.err


def test_sarif_carries_skipped_files_as_notifications(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project(tmp_path)
    monkeypatch.chdir(project)
    assert main(["audit", "--format", "sarif", "."]) == 1
    log = json.loads(capsys.readouterr().out)
    assert validation_errors(log) == []
    notes = log["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert len(notes) == 5 and all(n["message"]["text"].startswith("skipped:") for n in notes)
