"""The command line as kubectl/checkov users expect: rules, --skip/--only, stdin, pipes, --version, help."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dra_constructs.cli import main

BAD_POD = """apiVersion: v1
kind: Pod
metadata: {{name: p{i}, namespace: ml}}
spec:
  terminationGracePeriodSeconds: 30
  containers:
  - name: c
    image: img
    resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""


def _manifests(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "pods.yaml"
    path.write_text("---\n".join(BAD_POD.format(i=i) for i in range(count)))
    return path


def test_rules_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules"]) == 0
    text = capsys.readouterr().out
    assert all(f"DRA{i:03d}" in text for i in range(15)) and "why:" in text
    assert main(["rules", "--format", "json"]) == 0
    rules = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in rules} >= {"DRA001", "DRA009"} and all(r["fix"] for r in rules)


def test_skip_and_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(_manifests(tmp_path, 1))
    assert main(["audit", path]) == 1
    assert "DRA001" in capsys.readouterr().out
    assert main(["audit", "--skip", "DRA001,DRA008", path]) == 0
    assert "DRA001" not in capsys.readouterr().out
    assert main(["audit", "--only", "dra002", path]) == 0
    assert "0 errors" in capsys.readouterr().out
    assert main(["audit", "--only", "DRA002", "--only", "dra001", path]) == 1
    assert "DRA001" in capsys.readouterr().out
    assert main(["audit", "--skip", "DRA0001", path]) == 2
    assert "did you mean 'DRA001'" in capsys.readouterr().err


def test_cel_check_reads_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("device.driver == 'gpu.nvidia.com'\n\n"
                                                  "device.attributes['gpu.nvidia.com'].archtecture == 'Hopper'\n"))
    assert main(["cel", "check", "-"]) == 0
    out = capsys.readouterr().out
    assert out.count("OK") == 2 and "did you mean 'architecture'" in out


def test_no_broken_pipe_error_when_the_reader_goes_away(tmp_path: Path) -> None:
    expressions = "\n".join(f"device.driver == 'd{i}'" for i in range(5000)).encode()
    proc = subprocess.Popen([sys.executable, "-m", "dra_constructs.cli", "cel", "check", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(expressions)
    proc.stdin.close()
    proc.stdout.read(10)
    proc.stdout.close()  # what `| head -c 10` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == "", err


def test_both_console_scripts_share_the_pipe_handling(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from dra_constructs._cli_runner import run_parser
    from dra_constructs.agent import cli as sanitizer_cli

    def closed_pipe(_args: argparse.Namespace) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=closed_pipe)
    assert run_parser(parser, [], "dra-sanitizer") == 141
    assert capsys.readouterr().err == ""
    assert "run_parser" in sanitizer_cli.main.__code__.co_names


def test_version_and_help_written_for_users() -> None:
    for module, prog in (("dra_constructs.cli", "dra-constructs"), ("dra_constructs.agent.cli",
                                                                    "dra-sanitizer")):
        version = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True,
                                 check=True)
        assert version.stdout.strip() == f"{prog} 0.1.0"
        helptext = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True,
                                  check=True).stdout
        assert "``" not in helptext and "module" not in helptext and "exit codes" in helptext
