"""AgentConfig: defaults, strictness, JSON/YAML loading, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dra_constructs.agent.cli import main
from dra_constructs.agent.config import DEFAULT_TAINT_KEY, AgentConfig, QuarantinePolicy, load_config
from dra_constructs.errors import DraConstructsError


def test_defaults_are_the_documented_ones() -> None:
    config = AgentConfig()
    assert config.coverage_threshold == 0.99
    assert config.taint_key == DEFAULT_TAINT_KEY == "sanitizer.dra-constructs.io/barrier"
    assert config.backend == "nvml" and config.taint_effect == "NoSchedule"
    assert config.quarantine_policy is QuarantinePolicy.TAINT_AND_PROHIBIT
    assert config.kube.mode == "in-cluster" and config.drain_timeout_s >= config.grace_period_s


def test_yaml_and_json_load_the_same(tmp_path: Path) -> None:
    data = {"node_name": "n1", "grace_period_s": 5, "drain_timeout_s": 10, "simulated": {"gpus": 2},
            "kube": {"mode": "url", "url": "http://127.0.0.1:1"}}
    (tmp_path / "c.json").write_text(json.dumps(data))
    (tmp_path / "c.yaml").write_text("node_name: n1\ngrace_period_s: 5\ndrain_timeout_s: 10\n"
                                     "simulated: {gpus: 2}\nkube: {mode: url, url: 'http://127.0.0.1:1'}\n")
    assert load_config(tmp_path / "c.json") == load_config(tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml", node_name="n2").node_name == "n2"


@pytest.mark.parametrize(("text", "field"), [
    ("coverage_treshold: 0.9\n", "coverage_treshold"),          # typo: extra="forbid"
    ("coverage_threshold: 1.5\n", "coverage_threshold"),
    ("grace_period_s: 90\ndrain_timeout_s: 60\n", "<root>"),    # drain shorter than grace
    ("backend: cuda\n", "backend"),
    ("kube: {mode: url}\n", "kube"),
    ("- a list\n", "<root>"),
    ("key: [unclosed\n", "--config"),
])
def test_bad_config_names_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(DraConstructsError) as info:
        load_config(path)
    assert info.value.field == field
    assert str(path) in str(info.value) and "Fix:" in str(info.value)


def test_cli_rejects_bad_config_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("coverage_threshold: -1\n")
    assert main(["status", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "coverage_threshold" in err and "Traceback" not in err
    assert main(["run", "--config", str(tmp_path / "missing.yaml")]) == 2
