"""An uncaught library error ends a program with its message and the user's line, no traceback (issue 12)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_APP = """
import sys, cdk8s
{before}
from dra_constructs import Container, GpuClaimTemplate, GpuPod
app = cdk8s.App(outdir=sys.argv[2])
chart = cdk8s.Chart(app, "c")
t = GpuClaimTemplate.mig(chart, "s", gpu="A100_80GB", profile="3g.40gb")
p = GpuPod(chart, "p", containers=[Container(name="app", image="registry.example/a:1", claims=(t.use(),))])
if sys.argv[1] == "synth":
    p.add_json_patch(cdk8s.JsonPatch.replace("/spec/terminationGracePeriodSeconds", 0))
elif sys.argv[1] == "construct":
    GpuClaimTemplate.mig(chart, "bad", gpu="A100_80GB", profile="9g.99gb")
else:
    raise KeyError("not ours")
app.synth()
"""


def _run(tmp_path: Path, mode: str, before: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "main.py"
    script.write_text(_APP.format(before=before))
    return subprocess.run([sys.executable, str(script), mode, str(tmp_path / "dist")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", **env})


def test_a_construction_error_shows_the_message_and_the_users_line(tmp_path: Path) -> None:
    run = _run(tmp_path, "construct")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "Error: c/bad: requests['mig'].profile='9g.99gb': A100_80GB has no MIG profile" in run.stderr
    assert f"at {tmp_path / 'main.py'}:12: GpuClaimTemplate.mig(chart, \"bad\"" in run.stderr


def test_a_guardrails_error_at_synth_shows_its_findings(tmp_path: Path) -> None:
    run = _run(tmp_path, "synth")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "Error: [DRA008] Pod/default/" in run.stderr and "app.synth()" in run.stderr


def test_the_traceback_is_one_variable_away(tmp_path: Path) -> None:
    run = _run(tmp_path, "construct", DRA_CONSTRUCTS_TRACEBACK="1")
    assert run.returncode == 1
    assert "Traceback (most recent call last)" in run.stderr and "DraConstructsError" in run.stderr


@pytest.mark.parametrize("before", ["", "sys.excepthook = lambda *a: print('custom hook', file=sys.stderr)"])
def test_other_exceptions_and_other_hooks_are_left_alone(tmp_path: Path, before: str) -> None:
    run = _run(tmp_path, "other", before)
    assert run.returncode == 1
    assert ("custom hook" in run.stderr) if before else ("Traceback" in run.stderr and "KeyError" in run.stderr)
    custom = _run(tmp_path, "construct", before)
    assert ("custom hook" in custom.stderr) == bool(before)
