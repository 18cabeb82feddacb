"""The MIG config capability check (``migaccess.check_mig_config``) on a fake host root."""

from __future__ import annotations

from pathlib import Path

from dra_constructs.agent.migaccess import MigAccess, check_mig_config

_PROC = "proc/driver/nvidia/capabilities/mig/config"


def _proc(root: Path, text: str) -> None:
    path = root / _PROC
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")


def test_missing_capability_file_is_a_problem(tmp_path: Path) -> None:
    problem = check_mig_config(tmp_path)
    assert problem is not None and "mig/config" in problem


def test_dev_based_capability_needs_its_device_node(tmp_path: Path) -> None:
    _proc(tmp_path, "DeviceFileMinor: 1\nDeviceFileMode: 256\nDeviceFileModify: 1\n")
    problem = check_mig_config(tmp_path)
    assert problem is not None and "nvidia-cap1" in problem
    node = tmp_path / "dev/nvidia-caps/nvidia-cap1"
    node.parent.mkdir(parents=True)
    node.touch()
    assert check_mig_config(tmp_path) is None


def test_proc_based_capability_is_the_file_itself(tmp_path: Path) -> None:
    _proc(tmp_path, "")  # /proc-based capabilities: no device node, reading the file is the access
    assert check_mig_config(tmp_path) is None


def test_a_refusal_is_reported_once() -> None:
    said: list[str] = []
    access = MigAccess(report=said.append)
    access.refused("first")
    access.refused("second")
    assert access.problem == "first" and said == ["first"]
