"""Session fixtures of the real control plane (one cluster per version and pytest worker).

``control_plane_137`` / ``control_plane_134``: etcd + kube-apiserver, ready; call ``.ensure_allocation()``
for kube-scheduler + kube-controller-manager. Tests using them carry ``@pytest.mark.controlplane``.
Not built: skip naming ``make controlplane``; under CI=true that fails instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.cluster import ControlPlane, ControlPlaneUnavailable, ci, start_control_plane


def _plane(minor: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from running_plane(minor, tmp_path_factory.mktemp(f"kcp-{minor}"))


def running_plane(minor: str, work: Path, **options: Any) -> Iterator[ControlPlane]:
    """A control plane of ``minor`` in ``work`` for a fixture to yield; skips without one (fails under CI)."""
    try:
        context = start_control_plane(minor, work, **options)
        plane = context.__enter__()
    except ControlPlaneUnavailable as exc:
        if ci():
            pytest.fail(f"CI=true needs the real control plane: {exc}")
        pytest.skip(str(exc))
    try:
        yield plane
    finally:
        context.__exit__(None, None, None)


@pytest.fixture(scope="session")
def control_plane_137(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from _plane("1.37", tmp_path_factory)


@pytest.fixture(scope="session")
def control_plane_134(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    yield from _plane("1.34", tmp_path_factory)
