"""The control-plane fixture itself: the DRA APIs and gates it promises are really on, RBAC really
checks ServiceAccount tokens, the API server restarts under a client, the claim controller runs."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes import client

from controlplane.cluster import ControlPlane

pytestmark = pytest.mark.controlplane

PLANES = [pytest.param(minor, marks=pytest.mark.xdist_group(f"kcp-{minor}"), id=minor) for minor in ("1.37", "1.34")]


def _plane(request: pytest.FixtureRequest, minor: str) -> ControlPlane:
    plane: ControlPlane = request.getfixturevalue(f"control_plane_{minor.replace('.', '')}")
    return plane


def _template(name: str, api_version: str = "resource.k8s.io/v1") -> dict[str, Any]:
    """A claim template using consumable capacity (DRAConsumableCapacity: a gate off by default in 1.34)."""
    return {
        "apiVersion": api_version, "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.example.com", "capacity": {"requests": {"memory": "1Gi"}}}}]}}},
    }


@pytest.mark.parametrize("minor", PLANES)
def test_dra_api_versions_are_served(request: pytest.FixtureRequest, minor: str) -> None:
    plane = _plane(request, minor)
    for version in ("v1", "v1beta2", "v1beta1"):
        assert plane.resource_path(f"resource.k8s.io/{version}", "ResourceClaimTemplate")
    served = [v for v in ("v1", "v1beta2", "v1alpha3") if plane.request("GET", f"/apis/resource.k8s.io/{v}").ok
              and "DeviceTaintRule" in {r["kind"] for r in plane.request("GET", f"/apis/resource.k8s.io/{v}")
                                        .body["resources"]}]
    assert served, "DeviceTaintRule is served in no resource.k8s.io version"


@pytest.mark.parametrize("minor", PLANES)
def test_gated_fields_survive_a_dry_run(request: pytest.FixtureRequest, minor: str) -> None:
    """A field of an off-by-default gate is dropped silently when the gate is off: it must come back."""
    resp = _plane(request, minor).create(_template("consumable"))
    assert resp.ok, resp.body
    exactly = resp.body["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["capacity"] == {"requests": {"memory": "1Gi"}}


@pytest.mark.parametrize("minor", PLANES)
def test_strict_field_validation_rejects_unknown_fields(request: pytest.FixtureRequest, minor: str) -> None:
    doc = _template("unknown-field")
    doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]["colour"] = "green"
    resp = _plane(request, minor).create(doc)
    assert resp.status == 400 and 'unknown field "spec.spec.devices.requests[0].exactly.colour"' in str(resp.body)


@pytest.mark.parametrize("minor", PLANES)
def test_rbac_checks_service_account_tokens(request: pytest.FixtureRequest, minor: str) -> None:
    plane = _plane(request, minor)
    token = plane.service_account_token("rbac-probe", "reader")
    path = "/apis/resource.k8s.io/v1/namespaces/rbac-probe/resourceclaims"
    assert plane.request("GET", path, token=token).status == 403
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "claims", "namespace": "rbac-probe"},
            "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["list"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "claims", "namespace": "rbac-probe"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "claims"},
               "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "rbac-probe"}]}
    for doc in (role, binding):
        assert plane.create(doc, dry_run=False).status in (201, 409)
    deadline = time.monotonic() + 10  # the RBAC authorizer's informer sees the binding shortly after
    while plane.request("GET", path, token=token).status != 200:
        assert time.monotonic() < deadline, "the RoleBinding never took effect"
        time.sleep(0.1)
    assert plane.request("GET", path, token="not-a-token").status == 401
    with plane.api_client(token) as api:
        assert client.ResourceV1Api(api).list_namespaced_resource_claim("rbac-probe").items == []


@pytest.mark.parametrize("minor", PLANES)
def test_api_server_restarts_under_a_client(request: pytest.FixtureRequest, minor: str) -> None:
    plane = _plane(request, minor)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "survivor", "namespace": "default"}}
    assert plane.create(cm, dry_run=False).status in (201, 409)
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        plane.stop_apiserver()
        with pytest.raises(Exception, match=r"Connection refused|Max retries"):
            core.read_namespaced_config_map("survivor", "default", _request_timeout=2)
        plane.start_apiserver()
        assert core.read_namespaced_config_map("survivor", "default").metadata.name == "survivor"


@pytest.mark.xdist_group("kcp-1.37")
def test_allocation_components_older_than_the_api_server_are_started_again(request: pytest.FixtureRequest) -> None:
    """After an API server restart the next ``ensure_allocation`` starts the controller manager and the scheduler
    again (their watches may be in a backoff of up to 30 s), and only then."""
    plane = _plane(request, "1.37").ensure_allocation()
    pids = {c: plane._procs[c].pid for c in ("controller-manager", "scheduler")}
    assert {c: plane.ensure_allocation()._procs[c].pid for c in pids} == pids  # no restart: kept
    plane.stop_apiserver()
    plane.start_apiserver()
    again = {c: plane.ensure_allocation()._procs[c].pid for c in pids}
    assert all(again[c] != pids[c] and plane.running(c) for c in pids)


@pytest.mark.parametrize("minor", PLANES)
def test_claim_controller_makes_claims_from_templates(request: pytest.FixtureRequest, minor: str) -> None:
    plane = _plane(request, minor).ensure_allocation()
    assert plane.create(_template("from-template"), dry_run=False).status in (201, 409)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "claimer", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "from-template"}]}}
    assert plane.create(pod, dry_run=False).status in (201, 409)
    deadline = time.monotonic() + 30
    with plane.api_client() as api:
        resource = client.ResourceV1Api(api)
        while not (claims := resource.list_namespaced_resource_claim("default").items):
            assert time.monotonic() < deadline, "no ResourceClaim was made from the template"
            time.sleep(0.2)
    assert claims[0].metadata.owner_references[0].name == "claimer"
    assert claims[0].spec.devices.requests[0].exactly.capacity.requests == {"memory": "1Gi"}
