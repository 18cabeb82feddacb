"""``dra-constructs audit``: exit codes, JSON contract, SARIF 2.1.0, stdin, no tracebacks."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sarif_kit.validate import validation_errors

from dra_constructs.cli import main

from .helpers import FIXTURES

NONCOMPLIANT = FIXTURES / "noncompliant"
COMPLIANT = FIXTURES / "compliant"


def run(argv: list[str], capsys: pytest.CaptureFixture[str], stdin: str | None = None,
        monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    if stdin is not None:
        assert monkeypatch is not None
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_exit_codes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(["audit", str(COMPLIANT / "helm-web-app.yaml")], capsys)[0] == 0
    assert run(["audit", str(COMPLIANT / "gpu-test1.yaml")], capsys)[0] == 0  # warnings only
    assert run(["audit", str(NONCOMPLIANT / "guideline-unsafe-pod.yaml")], capsys)[0] == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: [Pod\n")
    code, out, err = run(["audit", str(bad)], capsys)
    assert code == 2 and out == ""
    assert f"{bad}:3" in err and "opened on line 2" in err and "Traceback" not in err
    assert run(["audit", str(tmp_path / "missing")], capsys)[0] == 2
    assert run(["audit", "--kubernetes-version", "1.20", str(bad)], capsys)[0] == 2


def test_fail_on_warning(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["audit", "--fail-on", "warning", str(COMPLIANT / "gpu-test1.yaml")], capsys)[0] == 1
    assert run(["audit", "--fail-on", "warning", str(COMPLIANT / "helm-web-app.yaml")], capsys)[0] == 0


def test_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    path = NONCOMPLIANT / "guideline-unsafe-pod.yaml"
    code, out, _ = run(["audit", "--format", "json", str(path)], capsys)
    report = json.loads(out)
    assert code == 1
    assert report["objects_scanned"] == 1
    first = next(f for f in report["findings"] if f["rule"] == "DRA001")
    assert {"rule", "severity", "object", "file", "path", "message", "fix"} <= set(first)
    assert first["object"] == "Pod/default/llm-sliced-inference"
    assert first["file"] == str(path)
    assert first["path"] == "spec.containers[0].resources.limits['nvidia.com/gpu']"
    assert {f["rule"] for f in report["findings"] if f["severity"] == "error"} == {"DRA001", "DRA002"}
    assert report["suppressed"] == []


def test_stdin_and_suppressed_in_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = (COMPLIANT / "suppressed-mps.yaml").read_text()
    code, out, _ = run(["audit", "--format", "json", "-"], capsys, stdin=text, monkeypatch=monkeypatch)
    report = json.loads(out)
    assert code == 0 and report["findings"] == []
    [suppressed] = report["suppressed"]
    assert suppressed["rule"] == "DRA006" and suppressed["file"] == "<stdin>"
    assert "SEC-2291" in suppressed["reason"]


def test_sarif_is_valid_2_1_0(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES.parent.parent.parent)  # repository root: URIs become repo-relative
    out_file = tmp_path / "audit.sarif"
    code, out, _ = run(["audit", "--format", "sarif", "-o", str(out_file), str(NONCOMPLIANT),
                        str(COMPLIANT / "suppressed-mps.yaml")], capsys)
    assert code == 1 and out == ""
    log = json.loads(out_file.read_text())
    assert validation_errors(log) == []
    run_ = log["runs"][0]
    rule_ids = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    assert rule_ids == [f"DRA{i:03d}" for i in (*range(15), *range(16, 23))]
    assert run_["properties"]["target"]["source"] == "inferred"  # the fixtures hold resource.k8s.io/v1 objects
    results = run_["results"]
    assert all(r["ruleId"] == rule_ids[r["ruleIndex"]] for r in results)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results}
    assert "tests/guardrails/fixtures/noncompliant/guideline-unsafe-pod.yaml" in uris
    assert all(r["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1 for r in results)
    suppressed = [r for r in results if "suppressions" in r]
    # suppressed-mps.yaml's DRA006, and the two DRA006 suppressions of cross-tenant-consumable-shares.yaml
    where = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].rsplit("/", 1)[1]
                   for r in suppressed)
    assert where == ["cross-tenant-consumable-shares.yaml"] * 2 + ["suppressed-mps.yaml"]
    assert all(r["suppressions"][0]["kind"] == "inSource" for r in suppressed)
    assert {r["level"] for r in results} <= {"error", "warning"}


def test_text_output_lists_findings_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["audit", str(NONCOMPLIANT / "v1alpha3-claim.yaml")], capsys)
    assert code == 1
    assert "error DRA007 ResourceClaim/ml/single-gpu apiVersion:" in out
    assert out.rstrip().endswith("1 objects scanned: 1 errors, 0 warnings, 0 suppressed")


def test_console_script_runs_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{ nope")
    proc = subprocess.run([sys.executable, "-m", "dra_constructs.cli", "audit", str(bad)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and f"{bad}:1" in proc.stderr


def test_a_console_run_exits_at_once_with_all_its_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The console run ends in ``os._exit`` once the report is written (``_cli_runner``): nothing may be lost."""
    argv = ["audit", "--format", "json", str(NONCOMPLIANT), str(COMPLIANT)]
    code, out, _ = run(argv, capsys)  # in process: returns
    assert code == 1 and out.endswith("}\n")
    console = [sys.executable, "-m", "dra_constructs.cli", *argv]
    piped = subprocess.run(console, capture_output=True, text=True, check=False)
    assert (piped.returncode, piped.stdout) == (code, out)
    report = tmp_path / "report.json"
    written = subprocess.run([*console, "-o", str(report)], capture_output=True, text=True, check=False)
    assert (written.returncode, written.stdout, report.read_text()) == (code, "", out)
    with (tmp_path / "stdout.json").open("w") as handle:  # a file as stdout: block-buffered, flushed before the exit
        assert subprocess.run(console, stdout=handle, check=False).returncode == code
    assert (tmp_path / "stdout.json").read_text() == out
