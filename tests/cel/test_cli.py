"""The stable `dra-constructs cel` contract: output shapes and exit codes 0/1/2."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from dra_constructs.catalog import catalog_resource_slices
from dra_constructs.cli import main

GOOD = "device.driver == 'gpu.nvidia.com'"
BAD = "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')"


def test_check_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cel", "check", GOOD]) == 0
    assert capsys.readouterr().out.startswith("OK (cost 4): ")
    assert main(["cel", "check", "--kubernetes-version", "1.34", GOOD, BAD]) == 1
    out = capsys.readouterr().out
    assert "Invalid: " + BAD in out and "<input>:1:42" in out and "compareTo" in out
    assert main(["cel", "check", "--kubernetes-version", "2.0", GOOD]) == 2
    assert main(["cel", "check"]) == 2


def test_check_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"expression": GOOD, "id": 7}) + "\n\n" + json.dumps({"expression": "1"}) + "\n")
    assert main(["cel", "check", "--kubernetes-version", "1.34", "--jsonl", str(source)]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == {"expression": GOOD, "id": 7, "verdict": "OK", "error": None, "cost": 4}
    assert lines[1]["verdict"] == "Invalid" and lines[1]["cost"] is None
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"expression": GOOD}) + "\n"))
    assert main(["cel", "check", "--jsonl", "-"]) == 0
    capsys.readouterr()
    source.write_text("{not json}\n")
    assert main(["cel", "check", "--jsonl", str(source)]) == 2
    source.write_text('{"expr": "x"}\n')
    assert main(["cel", "check", "--jsonl", str(source)]) == 2
    assert main(["cel", "check", "--jsonl", str(tmp_path / "missing")]) == 2


def test_match(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    slices = tmp_path / "slices.yaml"
    slices.write_text(yaml.safe_dump_all(catalog_resource_slices(["A100_40GB"], resource_version="v1beta1")))
    profile = "device.attributes['gpu.nvidia.com'].profile == '3g.20gb'"
    assert main(["cel", "match", "--slices", str(slices), "--device-class", "mig.nvidia.com", profile]) == 0
    result = json.loads(capsys.readouterr().out)
    assert sum(v is True for v in result.values()) == 16 and "gpu.nvidia.com/catalog-a100-40gb/gpu-0" in result
    assert main(["cel", "match", "--slices", str(slices), profile]) == 0
    whole_gpu = json.loads(capsys.readouterr().out)["gpu.nvidia.com/catalog-a100-40gb/gpu-0"]
    assert whole_gpu == "error: no such key: profile"
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text(json.dumps({"expression": profile, "k": 1}) + "\n" + json.dumps({"expression": BAD}) + "\n")
    assert main(["cel", "match", "--slices", str(slices), "--jsonl", str(jsonl)]) == 1
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["k"] == 1 and isinstance(first["matches"], dict) and second["matches"] is None
    assert main(["cel", "match", "--slices", str(slices), BAD]) == 1
    assert main(["cel", "match", "--slices", str(slices), "--device-class", "nope", GOOD]) == 2
    assert main(["cel", "match", "--slices", str(tmp_path / "none.yaml"), GOOD]) == 2
    assert main(["cel", "match", "--slices", str(slices)]) == 2
