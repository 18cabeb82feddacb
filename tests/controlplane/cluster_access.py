"""H8's view of H1's control-plane fixture: an admin client, the server's target and gates, restarts.

``control_plane_137`` / ``control_plane_134`` are H1's session fixtures (``fixtures.py``, registered
in tests/conftest.py: etcd + kube-apiserver; the scheduler and controller manager start on
``ensure_allocation()``). Only this module knows their attributes: a change there is one change here.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3

from dra_constructs.target import Target

from .apiclient import Api

__all__ = ["Cluster", "cluster", "cluster_134", "cluster_of"]


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
    etcd_url: str

    def compact_etcd(self) -> int:
        """Compact etcd to its current revision (etcd's JSON gateway): older resourceVersions are gone (410)."""
        http = urllib3.PoolManager(retries=False, timeout=10.0)
        key = base64.b64encode(b"/").decode()
        answer = http.request("POST", f"{self.etcd_url}/v3/kv/range", body=json.dumps({"key": key}).encode())
        revision = int(json.loads(answer.data)["header"]["revision"])
        done = http.request("POST", f"{self.etcd_url}/v3/kv/compaction",
                            body=json.dumps({"revision": str(revision), "physical": True}).encode())
        assert done.status == 200, done.data
        return revision


def fit_gates(target: Target, enabled: Any) -> dict[str, bool]:
    """``fit``'s gates: the target's defaults, with those the server runs switched on."""
    gates = dict(target.default_feature_gates)
    gates.update({name: True for name in enabled if name in gates})
    return gates


@pytest.fixture(scope="session")
def cluster(control_plane_137: Any) -> Cluster:
    """The 1.37 control plane with its scheduler and controller manager."""
    return cluster_of(control_plane_137)


@pytest.fixture(scope="session")
def cluster_134(control_plane_134: Any) -> Cluster:
    """The 1.34 control plane (the oldest built) with its scheduler and controller manager."""
    return cluster_of(control_plane_134)


def cluster_of(plane: Any) -> Cluster:
    """``plane`` (a running control plane of ``fixtures.py``) with its scheduler and controller manager."""
    plane = plane.ensure_allocation()
    admin = Api(plane.server, token=plane.admin_token, ca=str(plane.ca_file))
    version = admin.request("GET", "/version")
    target = Target.parse(f"{version['major']}.{''.join(c for c in version['minor'] if c.isdigit())}")
    return Cluster(admin, target, fit_gates(target, plane.spec.feature_gates), str(plane.ca_file),
                   getattr(plane, "audit_log", None), plane.stop_apiserver, plane.start_apiserver, plane.etcd_url)
