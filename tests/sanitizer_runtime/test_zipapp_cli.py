"""The zipapp (deterministic, small, runnable without the repo) and the dra-sanitizer commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
import zipfile
from io import BytesIO
from pathlib import Path

import pytest

from dra_constructs.agent.cli import main
from dra_constructs.agent.metrics import HealthServer, Metrics
from dra_constructs.agent.zipapp import build_zipapp


def test_zipapp_is_deterministic_small_and_runtime_only() -> None:
    data = build_zipapp()
    assert data == build_zipapp() and len(data) < 500_000
    names = zipfile.ZipFile(BytesIO(data)).namelist()
    assert names == sorted(names) and "__main__.py" in names
    assert "dra_constructs/agent/barrier.py" in names and "dra_constructs/target.py" in names
    assert not [n for n in names if n.endswith(("construct.py", "claims.py")) or "/cel/" in n or "guardrails" in n]
    assert {i.date_time for i in zipfile.ZipFile(BytesIO(data)).infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_zipapp_runs_simulate_without_the_repo_on_the_path(tmp_path: Path) -> None:
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(build_zipapp())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-I", str(pyz), "simulate", "--devices", "7", "--cycles", "2", "--seed", "4",
         "--records", "rec.jsonl"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["dirty_releases"] == 0 and summary["schedules"] >= 7 and summary["released"] > 0
    assert (tmp_path / "rec.jsonl").read_text().count("\n") == summary["barrier_records"] + summary[
        "operator_releases"]
    report = subprocess.run([sys.executable, "-I", str(pyz), "evidence", "--file", "rec.jsonl", "--html", "r.html"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr  # the evidence report runs from the archive alone
    assert report.stdout.startswith("TIME") and "<svg" in (tmp_path / "r.html").read_text()
    probe = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, 'agent.pyz'); "
                            "import dra_constructs.agent.cli as c; print(c.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert "agent.pyz" in probe.stdout  # loaded from the archive, not the repo


def _sim_config(tmp_path: Path) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(f"node_name: node-a\nbackend: simulated\nstate_dir: {tmp_path}/state\n"
                    f"evidence_file: {tmp_path}/evidence.jsonl\nsimulated: {{gpus: 1, mig_slices_per_gpu: 2}}\n"
                    "kube: {mode: disabled, kubernetes_version: '1.34'}\n")
    return path


def test_once_status_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = str(_sim_config(tmp_path))
    assert main(["once", "--config", config, "--device", "gpu-0-mig-1g10gb-19-0"]) == 0
    assert json.loads(capsys.readouterr().out)["result"] == "released"
    assert main(["status", "--config", config]) == 0
    states = {s["device"]: s["phase"] for s in json.loads(capsys.readouterr().out)}
    assert states == {"gpu-0-mig-1g10gb-19-0": "clean"}
    assert main(["release", "--config", config, "--device", "gpu-0-mig-1g10gb-19-0", "--reason", "x"]) == 2
    assert "not quarantined" in capsys.readouterr().err
    assert main(["release", "--config", config, "--device", "gpu-0-mig-1g10gb-19-1", "--reason", "fixed",
                 "--operator", "bob", "--force"]) == 0
    assert json.loads(capsys.readouterr().out)["trigger"] == "operator-release: fixed"
    assert main(["once", "--config", config, "--device", "gpu-9"]) == 2
    assert "gpu-0-mig-1g10gb-19-0" in capsys.readouterr().err  # names the devices there are


def test_node_name_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    config = _sim_config(tmp_path)
    config.write_text(config.read_text().replace("node_name: node-a\n", ""))
    assert main(["once", "--config", str(config), "--device", "gpu-0-mig-1g10gb-19-0"]) == 2
    assert "node_name" in capsys.readouterr().err
    monkeypatch.setenv("NODE_NAME", "node-env")
    assert main(["once", "--config", str(config), "--device", "gpu-0-mig-1g10gb-19-0"]) == 0
    assert json.loads(capsys.readouterr().out)["node"] == "node-env"
    assert main(["once", "--config", str(config), "--node-name", "node-arg", "--device",
                 "gpu-0-mig-1g10gb-19-1"]) == 0
    assert json.loads(capsys.readouterr().out)["node"] == "node-arg"


def test_simulate_command_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--devices", "3", "--cycles", "2", "--fault-rate", "0.2", "--seed", "9"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["dirty_releases"] == 0 and summary["devices"] == 3
    assert main(["simulate", "--fault-rate", "2"]) == 2
    assert "--fault-rate" in capsys.readouterr().err


def test_metrics_health_and_readiness() -> None:
    metrics = Metrics()
    ready = {"ok": False}
    server = HealthServer(metrics, "127.0.0.1", 0, lambda: True, lambda: ready["ok"])
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert urllib.request.urlopen(base + "/healthz", timeout=5).status == 200
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base + "/readyz", timeout=5)
        assert info.value.code == 503
        ready["ok"] = True
        assert urllib.request.urlopen(base + "/readyz", timeout=5).status == 200
        metrics.cycles.labels("released").inc()
        text = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        assert 'dra_sanitizer_barrier_cycles_total{result="released"} 1.0' in text
    finally:
        server.stop()
