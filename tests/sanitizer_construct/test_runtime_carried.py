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

from .helpers import agent_container, build, extract_bundle

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


def pod_command(docs: list[dict[str, Any]], zipapp: Path, *args: str, env: dict[str, str] | None = None,
                cwd: Path) -> subprocess.CompletedProcess[str]:
    """The container's own command line (verify bootstrap included) with its env, on the extracted files."""
    container = agent_container(docs)
    command = container["command"]
    at = next(i for i, c in enumerate(command) if c.endswith(".pyz"))
    pinned = {e["name"]: e["value"] for e in container["env"] if e["name"].endswith("_SHA256")}
    return subprocess.run([sys.executable, *command[1:at], str(zipapp), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin", **(
                              pinned if env is None else env)})


@pytest.mark.filterwarnings("ignore:Duplicate name")  # the swapped __main__.py shadows the real one
def test_the_pod_verifies_the_mounted_code_and_config_before_it_runs(
        synthesized: list[dict[str, Any]], tmp_path: Path) -> None:
    zipapp, config = extract_bundle(synthesized, tmp_path)
    args = ("simulate", "--devices", "2", "--cycles", "1", "--seed", "3")
    result = pod_command(synthesized, zipapp, *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["dirty_releases"] == 0
    # Another zipapp in the ConfigMap (same size, still a valid archive): refused before any of it runs.
    original = zipapp.read_bytes()
    marker = tmp_path / "ran"
    with zipfile.ZipFile(zipapp, "a") as archive:
        archive.writestr("__main__.py", f"open({str(marker)!r}, 'w').write('swapped code ran')\n")
    result = pod_command(synthesized, zipapp, *args, cwd=tmp_path)
    assert result.returncode == 1 and not marker.exists()
    assert "refusing to start: agent.pyz has sha256" in result.stderr and "Traceback" not in result.stderr
    zipapp.write_bytes(original)
    # A changed configuration (e.g. a weaker quarantine policy) is refused too.
    config.write_text(config.read_text().replace("taint-and-prohibit", "taint-only"))
    result = pod_command(synthesized, zipapp, *args, cwd=tmp_path)
    assert result.returncode == 1 and "config.yaml has sha256" in result.stderr
    # Without the pinned hashes (env stripped) nothing runs either.
    result = pod_command(synthesized, zipapp, *args, env={}, cwd=tmp_path)
    assert result.returncode == 1 and "refusing to start" in result.stderr
