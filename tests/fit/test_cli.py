"""``dra-constructs fit``: the JSON contract, exit codes and inputs as the issue writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.cli import main

PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"


def template(name: str, profile: str, count: int = 1) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {
                "deviceClassName": "mig.nvidia.com", "count": count,
                "selectors": [{"cel": {"expression": PROFILE.format(profile)}}]}}]}}}}


@pytest.fixture
def slices(tmp_path: Path) -> Path:
    path = tmp_path / "slices.yaml"
    docs = catalog_resource_slices(["A100_80GB"], gpus_per_node=1, mig_mode="dynamic", split_counter_sets=True)
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs}))
    return path


def write(tmp_path: Path, name: str, docs: list[dict[str, Any]]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_contract_and_exit_codes(tmp_path: Path, slices: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fits = write(tmp_path, "fits.yaml", [template("a", "3g.40gb"), template("b", "3g.40gb")])
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36", "--format", "json",
                       str(fits))
    report = json.loads(out)
    assert code == 0 and report["allocatable"] is True
    node = report["nodes"]["catalog-a100-80gb"]
    assert node["allocatable"] is True and node["reason"] is None
    assert {tuple(sorted(d)) for d in node["devices"]} == {("claim", "device", "driver", "pool", "request")}
    assert sorted(d["claim"] for d in node["devices"]) == ["a", "b"]
    full = write(tmp_path, "full.yaml", [template("a", "3g.40gb"), template("b", "3g.40gb"), template("c", "1g.10gb")])
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36", "--format", "json",
                       str(full))
    report = json.loads(out)
    assert code == 1 and report == {"pod": "claims without a namespace", "allocatable": False, "nodes": {
        "catalog-a100-80gb": {"allocatable": False, "devices": [],
                              "reason": report["nodes"]["catalog-a100-80gb"]["reason"]}}}
    assert "claim c" in report["nodes"]["catalog-a100-80gb"]["reason"]
    assert "counter" in report["nodes"]["catalog-a100-80gb"]["reason"]


def test_count_answers_how_many_pods_fit(tmp_path: Path, slices: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = write(tmp_path, "pod.yaml", [template("a", "2g.20gb")])
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36", "--format", "json",
                       "--count", str(pod))
    assert code == 0 and json.loads(out)["nodes"]["catalog-a100-80gb"]["count"] == 3
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36", "--count", str(pod))
    assert code == 0 and "x3 Pods" in out


def test_feature_gates_default_per_version(tmp_path: Path, slices: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = write(tmp_path, "pod.yaml", [template("a", "1g.10gb")])
    assert run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.35", str(pod))[0] == 1
    code, _, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.35",
                     "--feature-gates", "DRAPartitionableDevices=true", str(pod))
    assert code == 0
    code, _, err = run(capsys, "fit", "--slices", str(slices), "--feature-gates", "DRAPartitionableDevices", str(pod))
    assert code == 2 and "NAME=true" in err


def test_allocated_claims_take_their_devices(tmp_path: Path, slices: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    pod = write(tmp_path, "pod.yaml", [template("a", "3g.40gb")])
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "x", "namespace": "t"},
             "spec": {}, "status": {"allocation": {"devices": {"results": [
                 {"request": "r", "driver": "gpu.nvidia.com", "pool": "catalog-a100-80gb", "device": d}
                 for d in ("gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4")]}}}}
    allocated = write(tmp_path, "allocated.yaml", [claim])
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--allocated", str(allocated),
                       "--kubernetes-version", "1.36", "--format", "json", str(pod))
    assert code == 1 and "already allocated" in json.loads(out)["nodes"]["catalog-a100-80gb"]["reason"]


def test_device_classes_and_nodes_from_the_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = catalog_resource_slices(["A30"], gpus_per_node=1)
    slices = write(tmp_path, "slices.yaml", [*docs, {"apiVersion": "v1", "kind": "Node",
                                                    "metadata": {"name": "extra", "labels": {"a": "b"}}}])
    selector = "device.attributes['gpu.nvidia.com'].type == 'gpu'"
    device_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "a30.example.com"},
                    "spec": {"selectors": [{"cel": {"expression": selector}}]}}
    claim = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim", "metadata": {"name": "c"},
             "spec": {"devices": {"requests": [{"name": "g", "deviceClassName": "a30.example.com"}]}}}
    manifest = write(tmp_path, "claim.yaml", [device_class, claim])
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--format", "json", "--node", "catalog-a30",
                       str(manifest))
    report = json.loads(out)
    assert code == 0 and list(report["nodes"]) == ["catalog-a30"]
    assert report["nodes"]["catalog-a30"]["devices"][0]["device"] == "gpu-0"
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--format", "json", str(manifest))
    assert json.loads(out)["nodes"]["extra"]["allocatable"] is False


@pytest.mark.parametrize("argv, message", [
    (["--node", "nowhere"], "no slice or Node object names this node"),
    (["--kubernetes-version", "1.99"], "supports Kubernetes"),
])
def test_input_errors_exit_2(tmp_path: Path, slices: Path, capsys: pytest.CaptureFixture[str],
                             argv: list[str], message: str) -> None:
    pod = write(tmp_path, "pod.yaml", [template("a", "1g.10gb")])
    code, _, err = run(capsys, "fit", "--slices", str(slices), *argv, str(pod))
    assert code == 2 and message in err and "Traceback" not in err


def test_no_claims_or_bad_yaml_exit_2(tmp_path: Path, slices: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = write(tmp_path, "empty.yaml", [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}])
    code, _, err = run(capsys, "fit", "--slices", str(slices), str(empty))
    assert code == 2 and "no ResourceClaim" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [")
    assert run(capsys, "fit", "--slices", str(slices), str(bad))[0] == 2
    broken = write(tmp_path, "broken.yaml", [{**template("a", "1g.10gb"), "spec": {"spec": {"devices": {
        "requests": [{"name": "r", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 0}}]}}}}])
    code, _, err = run(capsys, "fit", "--slices", str(slices), str(broken))
    assert code == 2 and "count must be a positive integer" in err


class _Terminal:
    """A stderr that says it is a terminal (the progress indicator shows only there)."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("quiet", [False, True])
def test_progress_on_a_terminal_unless_quiet(tmp_path: Path, slices: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], quiet: bool) -> None:
    import sys

    fits = write(tmp_path, "fits.yaml", [template("a", "3g.40gb")])
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    code = main(["fit", *(["--quiet"] if quiet else []), "--slices", str(slices), "--kubernetes-version", "1.36",
                 str(fits)])
    assert code == 0 and "catalog-a100-80gb: allocatable" in capsys.readouterr().out
    if quiet:
        assert terminal.text == ""
    else:
        assert "\rdra-constructs: reading manifests" in terminal.text and "dra-constructs: fitting" in terminal.text
        assert terminal.text.endswith("\r")  # cleared before the report


def test_max_input_bytes_bounds_each_input_and_none_lifts_it(tmp_path: Path, slices: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    claims = write(tmp_path, "claims.yaml", [template("a", "3g.40gb")])
    small = str(claims.stat().st_size + 16)  # the claims fit, the slices do not
    code, _, err = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36",
                       "--max-input-bytes", small, str(claims))
    assert code == 2 and "--max-input-bytes" in err
    code, _, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36",
                     "--max-input-bytes", "none", str(claims))
    assert code == 0


def test_step_budget_bounds_the_search_and_names_itself(tmp_path: Path, slices: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--step-budget N: past N steps a node is 'gave up' (not allocatable, exit 1); bad N exits 2."""
    pod = write(tmp_path, "pod.yaml", [template("a", "3g.40gb"), template("b", "3g.40gb")])
    code, out, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36", "--format", "json",
                       "--step-budget", "1", str(pod))
    reason = json.loads(out)["nodes"]["catalog-a100-80gb"]["reason"]
    assert code == 1 and reason.startswith("gave up after 1 search steps"), reason
    code, _, _ = run(capsys, "fit", "--slices", str(slices), "--kubernetes-version", "1.36", "--step-budget",
                     "1_000", str(pod))
    assert code == 0
    with pytest.raises(SystemExit) as exit_:
        run(capsys, "fit", "--slices", str(slices), "--step-budget", "0", str(pod))
    assert exit_.value.code == 2 and "--step-budget" in capsys.readouterr().err
