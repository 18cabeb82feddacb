"""``dra-constructs fit`` over a directory: each Pod's claims together, never unrelated objects' or namespaces';
a bad selector names its object and field. Before, every claim of the input was one Pod's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.cli import main

GPU = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"


def template(name: str, namespace: str, count: int, admin: bool = False, selector: str = GPU) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": selector}}]}
    exactly.update({"allocationMode": "All", "adminAccess": True} if admin else {"count": count})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def workload(kind: str, name: str, namespace: str, template_name: str) -> dict[str, Any]:
    pod = {"containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}],
           "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}]}
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": pod}}}


@pytest.fixture
def slices(tmp_path: Path) -> Path:
    path = tmp_path / "slices.yaml"
    path.write_text(yaml.safe_dump_all(catalog_resource_slices(["A100_80GB"], gpus_per_node=8)))
    return path


def fit(capsys: pytest.CaptureFixture[str], slices: Path, *paths: Path, fmt: str = "json") -> tuple[int, Any]:
    code = main(["fit", "--slices", str(slices), "--kubernetes-version", "1.34", "--format", fmt,
                 "--node", "catalog-a100-80gb", *map(str, paths)])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if fmt == "json" and out else out or err)


def test_a_directory_with_the_sanitizer_and_two_tenants(tmp_path: Path, slices: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "sanitizer.yaml").write_text(yaml.safe_dump_all([
        template("agent", "gpu-system", 0, admin=True), workload("DaemonSet", "agent", "gpu-system", "agent")]))
    (app / "team-a.yaml").write_text(yaml.safe_dump_all([
        template("train", "team-a", 8), workload("Deployment", "train", "team-a", "train")]))
    (app / "team-b.yaml").write_text(yaml.safe_dump_all([template("train", "team-b", 8)]))  # no workload: alone
    code, report = fit(capsys, slices, app)
    assert code == 0 and report["allocatable"] is True
    assert [(p["pod"], p["claims"], p["allocatable"]) for p in report["pods"]] == [
        ("DaemonSet/gpu-system/agent", ["agent"], True),
        ("Deployment/team-a/train", ["train"], True),
        ("claims of namespace team-b", ["team-b/train#2"], True),
    ]
    code, text = fit(capsys, slices, app, fmt="text")
    assert code == 0 and text.splitlines()[0] == "DaemonSet/gpu-system/agent (claims agent):"
    assert text.splitlines()[-1] == "3 of 3 pod(s) can be allocated"


def test_one_pods_claims_are_still_allocated_together(tmp_path: Path, slices: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump_all([template("a", "ml", 5), template("b", "ml", 4)]))
    code, report = fit(capsys, slices, path)
    assert code == 1 and report["pod"] == "claims of namespace ml"
    assert "nodes" in report and report["allocatable"] is False


def test_a_bad_selector_names_its_object_and_field(tmp_path: Path, slices: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump_all([template("fine", "team-a", 1),
                                        template("broken", "team-b", 1, selector="device.attributes[")]))
    code, err = fit(capsys, slices, path)
    assert code == 2
    assert err.startswith("dra-constructs: error: ResourceClaimTemplate/team-b/broken: "
                          "spec.spec.devices.requests['gpu'].selectors[0].cel.expression=")
    assert "Traceback" not in err
