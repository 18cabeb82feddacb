"""Shared test setup: silence the Node 20 end-of-life banner of the jsii kernel; the real control plane's
session fixtures (``tests/controlplane/fixtures.py``) for every test folder; long tests first."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from controlplane.fixtures import control_plane_134, control_plane_137

__all__ = ["control_plane_134", "control_plane_137", "pytest_collection_modifyitems"]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` first, the rest in collection order (a stable sort).

    ``make test`` runs ``-n 2 --dist loadgroup``: xdist hands out the ``xdist_group`` groups first
    (largest first), then every other test in collection order, to whichever worker is free. A
    two-minute test collected near the end (``sanitizer_runtime/test_faults.py``) started when the
    other worker had little left and ran alone at the end; started early, short tests fill in
    around it (longest first, docs/testing.md "Suite time").
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
