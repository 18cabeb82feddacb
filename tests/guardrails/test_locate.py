"""Findings point at the offending field's line (text, JSON and SARIF output)."""

from __future__ import annotations

import io
import json
import sys

import pytest

from dra_constructs.cli import main
from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails.locate import parse_field_path, with_field_lines

from .helpers import FIXTURES


def test_parse_field_path_round_trips_our_paths() -> None:
    assert parse_field_path("spec.containers[0].resources.limits['nvidia.com/gpu']") == [
        "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"]
    assert parse_field_path("metadata.annotations[\"it's\"]") == ["metadata", "annotations", "it's"]
    assert parse_field_path("spec..x") is None


def _lines(path: str) -> dict[tuple[str, str], int | None]:
    result = with_field_lines(audit(load_paths([path])))
    return {(f.rule, f.path): f.line for f in result.findings}


def test_yaml_findings_move_to_their_fields() -> None:
    path = str(FIXTURES / "noncompliant" / "deployment-device-plugin.yaml")
    lines = _lines(path)
    text = (FIXTURES / "noncompliant" / "deployment-device-plugin.yaml").read_text().splitlines()
    limit = lines[("DRA001", "spec.template.spec.containers[0].resources.limits['nvidia.com/gpu']")]
    request = lines[("DRA001", "spec.template.spec.containers[0].resources.requests['nvidia.com/gpu']")]
    assert limit is not None and "nvidia.com/gpu: 2" in text[limit - 1]
    assert request is not None and "nvidia.com/gpu: 2" in text[request - 1] and request < limit


def test_missing_fields_point_at_their_parent_and_json_lists_at_items() -> None:
    lines = _lines(str(FIXTURES / "compliant" / "gpu-test1.yaml"))
    grace = [line for (rule, _), line in lines.items() if rule == "DRA008"]
    text = (FIXTURES / "compliant" / "gpu-test1.yaml").read_text().splitlines()
    assert grace and all(line is not None and text[line - 1].strip() == "spec:" for line in grace)
    json_lines = _lines(str(FIXTURES / "noncompliant" / "unused-pod-claim-list.json"))
    json_text = (FIXTURES / "noncompliant" / "unused-pod-claim-list.json").read_text().splitlines()
    line = json_lines[("DRA005", "spec.resourceClaims[1]")]
    assert line is not None and '"gpu-1"' in json_text[line - 1]


def test_stdin_findings_are_located(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = (FIXTURES / "noncompliant" / "zero-grace-deployment.yaml").read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["audit", "--format", "json", "-"]) == 1
    [finding] = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "DRA008"]
    assert "terminationGracePeriodSeconds: 0" in text.splitlines()[finding["line"] - 1]
