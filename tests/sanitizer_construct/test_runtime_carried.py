"""It carries the runtime: what the DaemonSet would run, taken from the YAML, runs and works.

The zipapp and the config are extracted from the synthesized ConfigMap exactly where the pod
spec mounts them and runs them from, written to a temp dir and run with the venv's Python
(which has the agent's third-party dependencies, as the image does) on the simulated backend.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.agent.zipapp import build_zipapp

from .helpers import build, extract_bundle

SIMULATED = {"gpus": 1, "mig_slices_per_gpu": 2}


@pytest.fixture(scope="module")
def synthesized() -> list[dict[str, Any]]:
    """The manifests, through YAML text (as kubectl would read them)."""
    _, docs = build("1.34", config={"coverage_threshold": 0.995, "grace_period_s": 5, "drain_timeout_s": 20})
    return list(yaml.safe_load_all(yaml.safe_dump_all(docs)))


def run(zipapp: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(zipapp), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)


def local_config(config: Path, folder: Path, **changes: Any) -> Path:
    """The synthesized config with only the node-local parts moved into ``folder``.

    Paths (the pod mounts host directories there), the API access (no cluster here) and the
    simulated node's size; every other field is the synthesized one.
    """
    data = yaml.safe_load(config.read_text())
    data["state_dir"] = str(folder / "state")
    data["evidence_file"] = str(folder / "evidence" / "evidence.jsonl")
    data["kube"]["mode"] = "disabled"
    data["simulated"] = SIMULATED
    data.update(changes)
    path = folder / "local.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_configmap_carries_exactly_this_packages_runtime(
        synthesized: list[dict[str, Any]], tmp_path: Path) -> None:
    zipapp, _ = extract_bundle(synthesized, tmp_path)
    assert zipapp.read_bytes() == build_zipapp()
    with zipfile.ZipFile(zipapp) as archive:
        names = set(archive.namelist())
    assert "__main__.py" in names and "dra_constructs/agent/barrier.py" in names
    assert not any(n.endswith(("construct.py", "claims.py", "workloads.py")) for n in names), "no cdk8s layer"


def test_the_extracted_zipapp_runs_the_simulated_barrier(synthesized: list[dict[str, Any]], tmp_path: Path) -> None:
    zipapp, _ = extract_bundle(synthesized, tmp_path)
    result = run(zipapp, "simulate", "--devices", "4", "--cycles", "2", "--seed", "7", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["devices"] == 4 and summary["cycles"] == 2
    assert summary["dirty_releases"] == 0 and summary["released"] > 0


def test_the_agent_loads_the_extracted_config_and_runs_a_barrier(
        synthesized: list[dict[str, Any]], tmp_path: Path) -> None:
    zipapp, config = extract_bundle(synthesized, tmp_path)
    local = local_config(config, tmp_path)
    device = "gpu-0-mig-1g10gb-19-0"
    result = run(zipapp, "once", "--config", str(local), "--backend", "simulated", "--node", "node-a",
                 "--device", device, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["device"] == device and record["node"] == "node-a"
    assert record["result"] == "released" and record["nonzero_words"] == 0
    assert record["coverage_of_free"] >= 0.995
    evidence = (tmp_path / "evidence" / "evidence.jsonl").read_text().splitlines()
    assert json.loads(evidence[-1])["device"] == device
    # The code that ran is the zipapp's, not the source tree's.
    where = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import dra_constructs.agent"
         ".barrier as b; print(b.__file__)", str(zipapp)], capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(zipapp))


def test_the_agent_rejects_a_broken_config_at_start(synthesized: list[dict[str, Any]], tmp_path: Path) -> None:
    zipapp, config = extract_bundle(synthesized, tmp_path)
    broken = local_config(config, tmp_path, coverage_threshold=1.5)
    result = run(zipapp, "once", "--config", str(broken), "--backend", "simulated", "--node", "node-a",
                 "--device", "gpu-0-mig-1g10gb-19-0", cwd=tmp_path)
    assert result.returncode == 2
    assert "coverage_threshold" in result.stderr and "Traceback" not in result.stderr
