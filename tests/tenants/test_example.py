"""Acceptance: the two-tenant Kueue example audits clean; one slice over quota, or a whole GPU shared with
the other tenant, is an error at synth and in ``dra-constructs audit``."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import cdk8s
import pytest
import yaml

from dra_constructs import set_kubernetes_version
from dra_constructs.cli import main
from dra_constructs.guardrails import Severity, ensure_guardrails, validate_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
sys.path.insert(0, str(EXAMPLES))
EXAMPLE: Any = importlib.import_module("two_tenants_kueue")

#: A whole H100 asked for as a share of its memory (consumable capacity): the GPU is allocated to
#: other claims at the same time, the other tenant's included.
SHARED_GPU = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "shared-h100", "namespace": "team-a"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1,
        "selectors": [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == "
                                             "'NVIDIA H100 80GB HBM3'"}}],
        "capacity": {"requests": {"memory": "40Gi"}}}}]}}},
}


def _build(outdir: Path) -> tuple[cdk8s.App, list[cdk8s.Chart]]:
    app = cdk8s.App(outdir=str(outdir))
    set_kubernetes_version(app, "1.34")
    charts = EXAMPLE.build(app)
    ensure_guardrails(app)
    return app, charts


def _audit(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]]]:
    code = main(["audit", "--kubernetes-version", "1.34", "--format", "json", *map(str, paths)])
    return code, json.loads(capsys.readouterr().out)["findings"]


def _errors(findings: list[Any]) -> set[str]:
    return {f.rule for f in findings if f.severity is Severity.ERROR}


def test_the_example_synthesizes_and_audits_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app, _ = _build(tmp_path)
    assert validate_app(app) == []
    app.synth()
    files = sorted(tmp_path.glob("*.k8s.yaml"))
    assert len(files) == 4
    for scope in ("file", "set"):
        code = main(["audit", "--kubernetes-version", "1.34", "--tenant-scope", scope, *map(str, files)])
        out = capsys.readouterr().out
        assert code == 0, out
    assert _audit(files, capsys) == (0, [])


def test_one_slice_over_quota_is_an_error_at_synth_and_in_audit(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    app, charts = _build(tmp_path / "synth")
    embeddings = charts[2].node.find_child("embeddings")
    assert isinstance(embeddings, cdk8s.ApiObject)
    embeddings.add_json_patch(cdk8s.JsonPatch.replace("/spec/replicas", 5))
    assert _errors(validate_app(app)) == {"DRA012"}
    with pytest.raises(RuntimeError, match=r"\[DRA012\] Deployment/team-b/.*needs 5 of .* allows 4"):
        app.synth()

    clean, _ = _build(tmp_path / "audit")
    clean.synth()
    apps_b = tmp_path / "audit" / "team-b-apps.k8s.yaml"
    text = apps_b.read_text()
    assert text.count("replicas: 4") == 1
    apps_b.write_text(text.replace("replicas: 4", "replicas: 5"))
    code, findings = _audit(sorted((tmp_path / "audit").glob("*.k8s.yaml")), capsys)
    assert code == 1
    assert {(f["rule"], f["severity"], f["namespace"]) for f in findings} == {("DRA012", "error", "team-b")}


def test_a_whole_gpu_shared_with_the_other_tenant_is_an_error_at_synth_and_in_audit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app, charts = _build(tmp_path / "synth")
    apps_a = charts[1]
    shared = cdk8s.ApiObject(apps_a, "shared-h100", api_version=SHARED_GPU["apiVersion"], kind=SHARED_GPU["kind"],
                             metadata=cdk8s.ApiObjectMetadata(name="shared-h100"))
    shared.add_json_patch(cdk8s.JsonPatch.add("/spec", SHARED_GPU["spec"]))
    server = apps_a.node.find_child("llm-server")
    assert isinstance(server, cdk8s.ApiObject)
    server.add_json_patch(cdk8s.JsonPatch.replace(
        "/spec/template/spec/resourceClaims/0/resourceClaimTemplateName", "shared-h100"))
    findings = validate_app(app)
    assert {"DRA012", "DRA013"} <= _errors(findings)
    [sharing] = [f for f in findings if f.rule == "DRA013"]
    assert sharing.object == "ResourceClaimTemplate/team-a/shared-h100" and "capacity" in sharing.path
    with pytest.raises(RuntimeError, match=r"\[DRA013\] ResourceClaimTemplate/team-a/shared-h100"):
        app.synth()

    clean, _ = _build(tmp_path / "audit")
    clean.synth()
    apps_a_file = tmp_path / "audit" / "team-a-apps.k8s.yaml"
    docs = [d for d in yaml.safe_load_all(apps_a_file.read_text()) if d]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    deployment["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "shared-h100"
    apps_a_file.write_text(yaml.safe_dump_all([*docs, SHARED_GPU], sort_keys=False))
    code, found = _audit(sorted((tmp_path / "audit").glob("*.k8s.yaml")), capsys)
    assert code == 1
    errors = {(f["rule"], f["object"]) for f in found if f["severity"] == "error"}
    assert ("DRA013", "ResourceClaimTemplate/team-a/shared-h100") in errors
    assert any(rule == "DRA012" and obj.startswith("Deployment/team-a/") for rule, obj in errors)


def test_a_whole_gpu_claim_of_the_other_tenant_is_an_error_at_synth_and_in_audit(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "whole-h100", "namespace": "team-b"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}}}
    app, charts = _build(tmp_path / "synth")
    owned = cdk8s.ApiObject(charts[2], "whole-h100", api_version=claim["apiVersion"], kind=claim["kind"],
                            metadata=cdk8s.ApiObjectMetadata(name="whole-h100"))
    owned.add_json_patch(cdk8s.JsonPatch.add("/spec", claim["spec"]))
    server = charts[1].node.find_child("llm-server")
    assert isinstance(server, cdk8s.ApiObject)
    server.add_json_patch(cdk8s.JsonPatch.replace("/spec/template/spec/resourceClaims/0", {
        "name": "serving-slice", "resourceClaimName": "whole-h100"}))
    errors = _errors(validate_app(app))
    assert {"DRA006", "DRA013", "DRA014"} <= errors
    with pytest.raises(RuntimeError, match=r"\[DRA013\] Deployment/team-a/.*belongs to tenant namespace\(s\) team-b"):
        app.synth()

    clean, _ = _build(tmp_path / "audit")
    clean.synth()
    apps_a_file = tmp_path / "audit" / "team-a-apps.k8s.yaml"
    docs = [d for d in yaml.safe_load_all(apps_a_file.read_text()) if d]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    deployment["spec"]["template"]["spec"]["resourceClaims"][0] = {"name": "serving-slice",
                                                                   "resourceClaimName": "whole-h100"}
    apps_a_file.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    (tmp_path / "audit" / "team-b-claim.yaml").write_text(yaml.safe_dump(claim))
    code, found = _audit(sorted((tmp_path / "audit").glob("*.yaml")), capsys)
    assert code == 1
    assert {"DRA006", "DRA013", "DRA014"} <= {f["rule"] for f in found if f["severity"] == "error"}
