"""Fixtures: a simulated node wired to the real barrier, and the fake API server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dra_constructs.agent.backends.simulated import FaultInjector, SimulatedNode
from dra_constructs.agent.config import AgentConfig, KubeSettings, SimulatedBackendSettings
from dra_constructs.agent.runtime import Runtime, build_runtime
from dra_constructs.agent.simkube import SimulatedKube

from .fakeapi import FakeApi


def sim_config(tmp_path: Path, version: str = "1.34", **fields: Any) -> AgentConfig:
    fields.setdefault("selftest_at_start", False)  # the canary's own tests turn it on (test_canary.py)
    settings = fields.pop("simulated", SimulatedBackendSettings(gpus=1, mig_slices_per_gpu=2, memory_bytes=2048))
    return AgentConfig(
        node_name="node-a", backend="simulated", grace_period_s=30, drain_timeout_s=60,
        state_dir=str(tmp_path / "state"), evidence_file=str(tmp_path / "evidence.jsonl"), simulated=settings,
        kube=KubeSettings(mode="disabled", kubernetes_version=version, retries=3, retry_backoff_s=0.1), **fields,
    )


class SimEnv:
    """A simulated node + in-memory API + runtime, rebuilt on demand (an agent restart)."""

    def __init__(self, tmp_path: Path, version: str = "1.34", faults: FaultInjector | None = None,
                 crash_hook: Any = None, **fields: Any) -> None:
        self.config = sim_config(tmp_path, version, **fields)
        self.faults = faults or FaultInjector()
        self.node = SimulatedNode(self.config.simulated, self.faults)
        self.kube = SimulatedKube(self.faults)
        self.crash_hook = crash_hook
        self.rt: Runtime = self.restart()

    def restart(self) -> Runtime:
        self.rt = build_runtime(self.config, kube_ops=self.kube, node=self.node, crash_hook=self.crash_hook,
                                fsync=False)
        return self.rt

    @property
    def device(self) -> Any:
        return self.rt.devices[0]


@pytest.fixture
def sim(tmp_path: Path) -> SimEnv:
    return SimEnv(tmp_path)


@pytest.fixture
def fake_api() -> Iterator[FakeApi]:
    api = FakeApi()
    yield api
    api.close()


@pytest.fixture(scope="session")
def standin_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in ``libcuda.so.1`` / ``libnvidia-ml.so.1``, compiled once per session."""
    from .standin import build

    return build(tmp_path_factory.mktemp("standin-lib"))


@pytest.fixture(scope="session")
def nvrtc_less_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python that sees this environment's packages but not the NVRTC wheel's site directory.

    A fresh venv whose only site directory holds a ``.pth`` pointing at ours: imports work,
    but cuda-pathfinder, which searches site directories (not ``sys.path``) for
    ``nvidia/cuda_nvrtc/lib``, finds no libnvrtc: as after a ``pip install`` without NVRTC.
    """
    import site
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("nvrtc-less")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    inner = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], check=True,
                           capture_output=True, text=True).stdout.strip()
    Path(inner, "shared.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    return str(python)
