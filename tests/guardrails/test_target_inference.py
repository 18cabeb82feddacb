"""``dra-constructs audit`` without --kubernetes-version: the target comes from the documents' API versions.

Before, it was always 1.32, so valid 1.34+ YAML got DRA011 errors for every v1 object.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dra_constructs.cli import main
from dra_constructs.guardrails import load_paths
from dra_constructs.guardrails.target_inference import infer_target

from .helpers import FIXTURES, claim_template, mig_request, pod

COMPLIANT = FIXTURES / "compliant"
_DTR = {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
        "spec": {"deviceSelector": {"driver": "gpu.nvidia.com"}, "taint": {"key": "k", "effect": "NoSchedule"}}}


def _audit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["audit", *argv])
    return code, capsys.readouterr().out


def test_valid_v1_yaml_is_judged_at_1_34(capsys: pytest.CaptureFixture[str]) -> None:
    path = COMPLIANT / "first-available-v1.yaml"
    code, out = _audit([str(path)], capsys)
    assert code == 0 and "DRA011" not in out
    assert out.splitlines()[0].startswith("target: Kubernetes 1.34 (inferred: the oldest release serving "
                                          "resource.k8s.io/v1 ")
    code, out = _audit(["--kubernetes-version", "1.32", str(path)], capsys)  # the old default
    assert code == 1 and "DRA011" in out and out.splitlines()[0] == "target: Kubernetes 1.32 (--kubernetes-version)"


@pytest.mark.parametrize(("objects", "version", "source"), [
    ([claim_template([mig_request()])], "1.32", "inferred"),
    ([claim_template([mig_request()], version="v1beta2")], "1.33", "inferred"),
    ([claim_template([mig_request()]), claim_template([mig_request()], version="v1")], "1.34", "inferred"),
    ([claim_template([mig_request()], version="v1"), _DTR], "1.36", "inferred"),
    ([pod({"containers": [{"name": "c", "image": "i"}]})], "1.37", "newest"),
])
def test_inference(objects: list[dict[str, object]], version: str, source: str, tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    choice = infer_target(load_paths([str(path)]))
    assert (str(choice.target), choice.source) == (version, source)


def test_json_and_sarif_say_which_target(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = COMPLIANT / "library-style-mig-v1beta2.yaml"
    _, out = _audit(["--format", "json", str(path)], capsys)
    target = json.loads(out)["target"]
    assert target["kubernetesVersion"] == "1.33" and target["source"] == "inferred"
    assert "v1beta2" in target["reason"]
    sarif = tmp_path / "a.sarif"
    _audit(["--format", "sarif", "-o", str(sarif), "--kubernetes-version", "1.36", str(path)], capsys)
    props = json.loads(sarif.read_text())["runs"][0]["properties"]
    assert props["target"] == {"kubernetesVersion": "1.36", "source": "option", "reason": "--kubernetes-version"}


def test_a_bad_version_still_fails_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--kubernetes-version", "1.99", "/nonexistent"]) == 2
    assert "supports Kubernetes 1.32 to 1.37" in capsys.readouterr().err
