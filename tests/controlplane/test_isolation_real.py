"""MIG isolation against the real 1.37 API server (issue 23 item 6).

1. The agent's isolation DeviceTaintRules, placed, changed and removed by ``agent/isolation.py`` through
   ``KubeClient`` under the sanitizer's rendered ServiceAccount: the server accepts their shape and the
   agent's RBAC covers them.
2. ``GpuTenant(mig_isolation="exclusive-gpu")``'s claim template (with its toleration) is accepted, and
   the tenant's own admission policy, created for real, refuses the template without the toleration
   with DRA022.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import cdk8s
import pytest
from prometheus_client import CollectorRegistry

from dra_constructs import GpuModel, set_kubernetes_version
from dra_constructs.agent.clock import RealClock
from dra_constructs.agent.config import KubeSettings
from dra_constructs.agent.devices import DeviceInfo
from dra_constructs.agent.isolation import Isolation, isolation_rule_name
from dra_constructs.agent.kube import KubeClient
from dra_constructs.agent.state import StateStore
from dra_constructs.isolation import CONFLICT_VALUE, own_toleration
from dra_constructs.tenants import GpuTenant, Mig

from .apiclient import ApiFailure
from .cluster_access import Cluster, cluster  # noqa: F401 - fixture
from .sanitizer_identity import install_identity, render_chart

pytestmark = [pytest.mark.controlplane, pytest.mark.xdist_group("kcp-1.37")]

NODE = "iso-node"
NAMESPACE = "iso-team-a"
DEVICES = [f"gpu-7-mig-1g10gb-19-{s}" for s in (0, 1, 2)]


def _claim(namespace: str, uid: str, device: str, exclusive: bool) -> dict[str, Any]:
    exactly = {"deviceClassName": "mig.nvidia.com", "tolerations": [own_toleration(namespace)] if exclusive else []}
    return {"metadata": {"name": uid, "namespace": namespace, "uid": uid},
            "spec": {"devices": {"requests": [{"name": "mig", "exactly": exactly}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "mig", "driver": "gpu.nvidia.com", "pool": NODE, "device": device}]}}}}


def test_the_agent_s_isolation_rules_are_accepted_under_its_own_identity(cluster: Cluster,  # noqa: F811
                                                                         tmp_path: Path) -> None:
    target = cluster.target
    version = target.device_taint_rule_api_version
    assert version is not None
    identity = install_identity(cluster.admin, render_chart(str(target)), tmp_path / "identity", cluster.ca_file)
    client = KubeClient(KubeSettings(mode="kubeconfig", kubeconfig=str(identity.kubeconfig), request_timeout_s=5))
    inventory = {d: DeviceInfo(d, f"MIG-iso-{i}", 7, 1 << 30, parent_uuid="GPU-iso-7", mig_profile="1g.10gb",
                               placement=(19, i, 1)) for i, d in enumerate(DEVICES)}
    events: list[str] = []
    isolation = Isolation(client, target, NODE, inventory=inventory, store=StateStore(str(tmp_path / "state"),
                                                                                        fsync=False),
                          event=lambda _d, reason, _m, _c, _w: events.append(reason) is None,
                          registry=CollectorRegistry(), shared_taints=True, retries=2, backoff_s=0.1)

    def values() -> list[str | None]:
        found: list[str | None] = []
        for device in DEVICES:
            try:
                rule = cluster.admin.get(version, "DeviceTaintRule", isolation_rule_name(NODE, device))
            except ApiFailure as failure:
                assert failure.status == 404
                found.append(None)
                continue
            assert rule["spec"]["deviceSelector"] == {"driver": "gpu.nvidia.com", "pool": NODE, "device": device}
            found.append(rule["spec"]["taint"]["value"])
        return found

    clock = RealClock()
    try:
        a = _claim(NAMESPACE, "iso-a", DEVICES[0], True)
        isolation.reconcile([a], clock)
        assert values() == [NAMESPACE] * 3
        isolation.reconcile([a, _claim("iso-team-b", "iso-b", DEVICES[1], False)], clock)  # a race
        assert values() == [CONFLICT_VALUE] * 3 and events == ["IsolationBreached"]
        isolation.reconcile([], clock)
        assert values() == [None] * 3
    finally:
        for device in DEVICES:
            cluster.admin.delete(version, "DeviceTaintRule", isolation_rule_name(NODE, device))
        client.close()


def _tenant_objects(version: str) -> list[dict[str, Any]]:
    app = cdk8s.App()
    set_kubernetes_version(app, version)
    platform = cdk8s.Chart(app, "platform")
    tenant = GpuTenant(platform, NAMESPACE, quotas={Mig(GpuModel.H100_80GB, "1g.10gb"): 4},
                       mig_isolation="exclusive-gpu")
    apps = cdk8s.Chart(app, "apps", namespace=NAMESPACE)
    tenant.claim_template(apps, "slice", Mig(GpuModel.H100_80GB, "1g.10gb"))
    return [dict(o) for chart in app.charts for o in chart.to_json()]


def test_the_exclusive_tenant_s_toleration_and_policy_on_the_server(cluster: Cluster) -> None:  # noqa: F811
    admin = cluster.admin
    objects = _tenant_objects(str(cluster.target))
    by_kind = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    admin.create(by_kind[("Namespace", NAMESPACE)], exist_ok=True)
    name = f"dra-tenant-{NAMESPACE}-device-classes"
    policy, binding = by_kind[("ValidatingAdmissionPolicy", name)], by_kind[("ValidatingAdmissionPolicyBinding", name)]
    for obj in (policy, binding):
        admin.create(obj, exist_ok=True)
    [template] = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    bare = {**template, "metadata": {**template["metadata"], "name": "bare"},
            "spec": {"spec": {"devices": {"requests": [{"name": "mig", "exactly": {
                k: v for k, v in exactly.items() if k != "tolerations"}}]}}}}
    try:
        deadline = time.monotonic() + 30
        while True:  # the admission plugin sees a new policy through an informer, a moment after it is stored
            try:
                admin.create(bare, params={"dryRun": "All"})
            except ApiFailure as failure:
                assert "DRA022" in str(failure.body), failure.body
                break
            assert time.monotonic() < deadline, "the tenant's policy never took effect"
            time.sleep(0.2)
        admin.create(template, params={"dryRun": "All"})  # the rendered toleration: accepted
    finally:
        admin.delete(binding["apiVersion"], binding["kind"], name)
        admin.delete(policy["apiVersion"], policy["kind"], name)
