"""Shared test setup: silence the Node 20 end-of-life banner of the jsii kernel; the real control plane's
session fixtures (``tests/controlplane/fixtures.py``) for every test folder, each stopped after the last
test of its group; long tests first."""

from __future__ import annotations

import functools
import os

import kubernetes_validate.utils
import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from controlplane import fixtures
from controlplane.fixtures import control_plane_134, control_plane_137

__all__ = ["control_plane_134", "control_plane_137", "pytest_collection_finish", "pytest_collection_modifyitems",
           "pytest_runtest_logfinish", "pytest_runtest_setup"]

# kubernetes-validate reads and parses the kind's schema and the version's ``_definitions.json`` (1.8 MB at 1.37)
# at every ``validate()``: a third of a slice's validation (docs/testing.md "Where the suite stands"). The
# files do not change during a run and jsonschema does not mutate a schema, so each is parsed once per process.
kubernetes_validate.utils.schema_contents = functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents)


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


def pytest_collection_finish(session: pytest.Session) -> None:
    """Which tests each session control plane serves (its ``kcp-<minor>`` group)."""
    fixtures.expect(session.items)


def pytest_runtest_setup(item: pytest.Item) -> None:
    fixtures.check_not_stopped(item)


def pytest_runtest_logfinish(nodeid: str) -> None:
    """A session plane stops once its group's last test has run here, not at the end of the session."""
    fixtures.stop_when_done(nodeid)
