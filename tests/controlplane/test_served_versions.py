"""What ``Target`` says about 1.34 and 1.37 API servers, asked of the real ones (issue 24 item 8).

- Served by default: an API server started with no ``--runtime-config`` and no feature gates; its
  discovery of ``resource.k8s.io`` must list exactly the (version, kind) pairs
  ``Target.served_by_default`` names.
- Claim status authorization: a ServiceAccount granted exactly ``Target.claim_status_writer_rules``
  may write ``status.devices``; one granted only ``resourceclaims/status`` may from 1.36 not
  (``DRAResourceClaimGranularStatusAuthorization``, on in the fixtures as by default).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.cluster import ControlPlane
from controlplane.fixtures import running_plane
from dra_constructs.target import API_VERSIONS, Target

pytestmark = pytest.mark.controlplane

_PLURALS = {"ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates",
            "DeviceClass": "deviceclasses", "ResourceSlice": "resourceslices", "DeviceTaintRule": "devicetaintrules"}
DRIVER = "gpu.example.com"
NAMESPACE = "status-writers"


@pytest.fixture(params=["1.37", "1.34"])
def default_plane(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ControlPlane]:
    yield from running_plane(request.param, tmp_path / "kcp", defaults=True)


def test_discovery_of_a_default_api_server_is_what_target_says(default_plane: ControlPlane) -> None:
    target = Target.parse(default_plane.version)
    group = default_plane.request("GET", "/apis/resource.k8s.io")
    assert group.ok, group.body
    served: set[tuple[str, str]] = set()
    for version in (v["groupVersion"] for v in group.body["versions"]):
        listing = default_plane.request("GET", f"/apis/{version}")
        assert listing.ok, listing.body
        served |= {(version, r["kind"]) for r in listing.body["resources"] if "/" not in r["name"]}
    expected = {(f.api_version, k) for f in API_VERSIONS for k in f.kinds if target.served_by_default(f.api_version, k)}
    assert served == expected
    assert ("resource.k8s.io/v1", "DeviceTaintRule") in served if target.minor >= 37 else not any(
        kind == "DeviceTaintRule" for _, kind in served)


def _status_writer(plane: ControlPlane, name: str, rules: list[dict[str, Any]]) -> str:
    """A ServiceAccount bound to a ClusterRole of ``rules``; its token."""
    token = plane.service_account_token(NAMESPACE, name)
    for doc in ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
                 "rules": rules},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                 "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]}):
        resp = plane.create(doc, dry_run=False)
        assert resp.ok, resp.body
    return token


def _allocated_claim(plane: ControlPlane, name: str) -> tuple[str, dict[str, Any]]:
    """A claim the admin allocated to one device of ``DRIVER`` (as the scheduler would)."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": NAMESPACE},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    created = plane.create(claim, dry_run=False)
    assert created.ok, created.body
    body = created.body
    body["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}]}}}
    path = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaims/{name}/status"
    allocated = plane.request("PUT", path, body)
    assert allocated.ok, allocated.body
    return path, allocated.body


def _write_device_status(plane: ControlPlane, token: str, name: str) -> Any:
    path, claim = _allocated_claim(plane, name)
    claim["status"]["devices"] = [{"driver": DRIVER, "pool": "node-a", "device": "gpu-0",
                                   "conditions": [{"type": "Ready", "status": "True", "reason": "Prepared",
                                                   "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}]}]
    return plane.request("PUT", path, claim, token=token)


@pytest.mark.parametrize("minor", [pytest.param(m, marks=pytest.mark.xdist_group(f"kcp-{m}"), id=m)
                                   for m in ("1.37", "1.34")])
def test_status_devices_writers_need_exactly_the_rules_target_names(request: pytest.FixtureRequest,
                                                                     minor: str) -> None:
    plane: ControlPlane = request.getfixturevalue(f"control_plane_{minor.replace('.', '')}")
    target = Target.parse(plane.version)
    claims = {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}
    rules = [r.manifest() for r in target.claim_status_writer_rules(DRIVER, node_local=False)]
    writer = _status_writer(plane, "writer", [claims, *rules])
    assert _write_device_status(plane, writer, "by-writer").ok

    status_only = _status_writer(plane, "status-only", [claims, rules[0]])
    refused = _write_device_status(plane, status_only, "by-status-only")
    if target.claim_status_authorization_is_granular:
        assert not refused.ok and 'resource="resourceclaims/driver"' in str(refused.body), refused.body
    else:
        assert refused.ok, refused.body

    if target.claim_status_authorization_is_granular:
        # associated-node: verbs need a token bound to the claim's node; a plain ServiceAccount token is not.
        local = [r.manifest() for r in target.claim_status_writer_rules(DRIVER, node_local=True)]
        node_bound_only = _status_writer(plane, "node-local", [claims, *local])
        assert not _write_device_status(plane, node_bound_only, "by-node-local").ok
