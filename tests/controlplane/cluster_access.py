"""H8's view of the control-plane fixture: an admin client, the server's target and gates, restarts.

``control_plane`` is the session fixture of ``tests/controlplane/conftest.py`` (H1). Only this
module knows its attributes, so a change there is one change here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dra_constructs.target import Target

from .apiclient import Api

__all__ = ["Cluster", "cluster"]


@dataclass
class Cluster:
    """What the tests of this package use of one running control plane."""

    admin: Api
    target: Target
    gates: dict[str, bool]
    ca_file: str | None
    audit_log: Path | None
    stop_apiserver: Callable[[], None]
    start_apiserver: Callable[[], None]


def _gates(target: Target, enabled: dict[str, bool]) -> dict[str, bool]:
    """``fit``'s gates: the target's defaults, overridden by what the server runs with."""
    gates = dict(target.default_feature_gates)
    gates.update({k: v for k, v in enabled.items() if k in gates})
    return gates


@pytest.fixture(scope="session")
def cluster(control_plane: Any, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    admin = Api.from_kubeconfig(control_plane.kubeconfig, tmp_path_factory.mktemp("admin-kubeconfig"))
    version = admin.request("GET", "/version")
    target = Target.parse(f"{version['major']}.{''.join(c for c in version['minor'] if c.isdigit())}")
    return Cluster(admin, target, _gates(target, dict(control_plane.feature_gates)),
                   getattr(control_plane, "ca_file", None), getattr(control_plane, "audit_log", None),
                   control_plane.stop_apiserver, control_plane.start_apiserver)
