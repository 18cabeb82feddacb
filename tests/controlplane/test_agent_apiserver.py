"""The sanitizer agent against the real API server, as its rendered ServiceAccount (issue 21 item 4).

Two tests: ``KubeClient`` call by call (claims list/watch, 410 on a too-old resourceVersion,
DeviceTaintRule create / replace on 409 / an operator's delete / delete of a gone rule, Events,
the API server stopped and started under it, a verb the role does not grant), and the agent
process (the zipapp, ``run``) on the stand-in GPU libraries, released and re-guarded through the
server, with the API server restarted under it; its audit trail is then compared with the RBAC
the construct renders: nothing it used is missing, nothing granted is unused.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.agent.clock import RealClock
from dra_constructs.agent.config import KubeSettings
from dra_constructs.agent.guard import Guard
from dra_constructs.agent.kube import ApiError, KubeClient, allocated_devices
from dra_constructs.agent.taints import taint_rule, taint_rule_name
from dra_constructs.agent.zipapp import build_zipapp

from .apiclient import Api, ApiFailure
from .cluster_access import Cluster, cluster  # noqa: F401 - fixture
from .oracle_cases import node as fake_node
from .sanitizer_identity import SanitizerIdentity, granted_verbs, install_identity, render_chart

pytestmark = [pytest.mark.controlplane, pytest.mark.xdist_group("kcp-1.37")]

NODE = "node-a"
DRIVER = "gpu.nvidia.com"
TENANT_NS = "h8-team-a"


def _wait(predicate: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@pytest.fixture(scope="module")
def chart(cluster: Cluster) -> list[dict[str, Any]]:  # noqa: F811
    """The construct's manifests for the server's version (synthesized once: ~7 s)."""
    cluster.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TENANT_NS}}, exist_ok=True)
    return render_chart(str(cluster.target))


@pytest.fixture
def identity(cluster: Cluster, chart: list[dict[str, Any]], tmp_path: Path) -> SanitizerIdentity:  # noqa: F811
    """The rendered identity on the server, with a token of this test's own (the audit log tells them apart)."""
    return install_identity(cluster.admin, chart, tmp_path / "identity", cluster.ca_file)


def _allocated_claim(admin: Api, name: str, device: str, *, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """A claim the admin allocates to ``device`` of ``node-a`` by hand (status as the scheduler writes it).

    Its reservation names a real Pod bound to node-a (the resourceclaim controller deallocates a
    claim whose reservations name no live Pod).
    """
    admin.create(fake_node(NODE, "agent"), exist_ok=True)
    pod = admin.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"{name}-pod", "namespace": TENANT_NS},
                        "spec": {"nodeName": NODE, "tolerations": [{"operator": "Exists"}],
                                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                                 "resources": {"claims": [{"name": "gpu"}]}}],
                                 "resourceClaims": [{"name": "gpu", "resourceClaimName": name}]}})
    claim = admin.create({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                          "metadata": {"name": name, "namespace": TENANT_NS},
                          "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                              "deviceClassName": "gpu.nvidia.com", "count": 1}}]}}})
    allocation: dict[str, Any] = {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}}
    if policy is not None:
        allocation["devices"]["config"] = [{"source": "FromClaim", "requests": ["gpu"], "opaque": {
            "driver": "sanitizer.dra-constructs.io", "parameters": policy}}]
    claim["status"] = {"allocation": allocation,
                       "reservedFor": [{"resource": "pods", "name": f"{name}-pod", "uid": pod["metadata"]["uid"]}]}
    path = f"/apis/resource.k8s.io/v1/namespaces/{TENANT_NS}/resourceclaims/{name}/status"
    return dict(admin.request("PUT", path, claim))


def _release(admin: Api, name: str) -> None:
    """The Pod ends and its claim is deleted (no kubelet: grace period 0)."""
    admin.delete("v1", "Pod", f"{name}-pod", TENANT_NS, gracePeriodSeconds=0)
    admin.delete("resource.k8s.io/v1", "ResourceClaim", name, TENANT_NS)


def _rule(admin: Api, version: str, device: str) -> dict[str, Any] | None:
    try:
        return dict(admin.get(version, "DeviceTaintRule", taint_rule_name(NODE, device)))
    except ApiFailure as failure:
        if failure.status == 404:
            return None
        raise


# --- KubeClient, call by call ---------------------------------------------------------------


def test_the_client_does_its_calls_under_the_rendered_role(cluster: Cluster,  # noqa: F811
                                                            identity: SanitizerIdentity) -> None:
    target, admin = cluster.target, cluster.admin
    version = target.resource_version
    rule_version = target.device_taint_rule_api_version
    assert rule_version is not None
    client = KubeClient(KubeSettings(mode="kubeconfig", kubeconfig=str(identity.kubeconfig), request_timeout_s=5,
                                     watch_timeout_s=3))
    try:
        assert client.server_version() == str(target)
        _, since = client.list_claims(version)
        claim = _allocated_claim(admin, "list-watch", "gpu-7")
        items, _ = client.list_claims(version)
        mine = [c for c in items if c["metadata"]["uid"] == claim["metadata"]["uid"]]
        assert [t.claim for t in allocated_devices(mine, NODE).values()] == [f"{TENANT_NS}/list-watch"]
        events = list(client.watch_claims(version, since))  # ends at the server-side timeout (3 s)
        assert any(kind == "ADDED" and obj["metadata"]["name"] == "list-watch" for kind, obj in events)
        assert any(kind == "MODIFIED" and obj.get("status", {}).get("allocation") for kind, obj in events)
        pods, _ = client.list_pods(NODE)
        assert [p["metadata"]["name"] for p in pods] == ["list-watch-pod"]

        body = taint_rule(target, NODE, "gpu-7", key="sanitizer.dra-constructs.io/barrier", effect="NoSchedule",
                          value="in-use")
        client.apply_taint_rule(body)  # create
        assert (_rule(admin, rule_version, "gpu-7") or {})["spec"]["taint"]["value"] == "in-use"
        client.apply_taint_rule({**body, "spec": {**body["spec"], "taint": {**body["spec"]["taint"],
                                                                           "value": "sanitizing"}}})  # 409, replace
        assert (_rule(admin, rule_version, "gpu-7") or {})["spec"]["taint"]["value"] == "sanitizing"
        admin.delete(rule_version, "DeviceTaintRule", body["metadata"]["name"])  # an operator deletes it
        client.apply_taint_rule(body)  # created again
        assert (_rule(admin, rule_version, "gpu-7") or {})["spec"]["taint"]["value"] == "in-use"
        client.delete_taint_rule(rule_version, body["metadata"]["name"])
        client.delete_taint_rule(rule_version, body["metadata"]["name"])  # gone already: fine
        assert _rule(admin, rule_version, "gpu-7") is None

        # Events as the agent builds them (Guard.event: about the Node, in the agent's namespace).
        guard = Guard(client, target, NODE, key="sanitizer.dra-constructs.io/barrier", effect="NoSchedule",
                      retries=0, backoff_s=0.1, event_namespace=identity.namespace)
        assert guard.event("gpu-7", "Probe", "probe", RealClock())
        assert any(e["reason"] == "Probe" and e["involvedObject"]["name"] == NODE
                   for e in admin.list("v1", "Event", identity.namespace))
        elsewhere = Guard(client, target, NODE, key="sanitizer.dra-constructs.io/barrier", effect="NoSchedule",
                          retries=0, backoff_s=0.1, event_namespace=TENANT_NS)
        assert not elsewhere.event("gpu-7", "Probe", "probe", RealClock())  # the role grants Events only at home

        cluster.stop_apiserver()
        try:
            with pytest.raises(ApiError) as down:
                client.list_claims(version)
            assert down.value.status == 0 and down.value.retriable
        finally:
            cluster.start_apiserver()
        items, _ = _wait(lambda: _try(lambda: client.list_claims(version)), 30, "the API server back")
        assert any(c["metadata"]["name"] == "list-watch" for c in items)
        # The restarted server's watch cache begins now; etcd compacted (as the server does every 5
        # minutes): a watch from before the restart is 410 Gone, on which the agent re-lists.
        cluster.compact_etcd()
        with pytest.raises(ApiError) as gone:
            list(client.watch_claims(version, since))
        assert gone.value.status == 410
    finally:
        client.close()
        _release(admin, "list-watch")


def _try(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ApiError:
        return None


# --- the agent process on the stand-in GPU, and its audit trail ----------------------------


def _standin_node(tmp_path: Path) -> Any:
    """One whole stand-in GPU (``gpu-0``), as tests/sanitizer_runtime builds it."""
    from sanitizer_runtime.standin import GPU, MiB, Node, build

    lib = build(tmp_path / "standin-lib")
    return Node(tmp_path / "node", lib, [GPU("GPU-a", minor=0, total=64 * MiB)]).write()


@pytest.fixture
def agent_process(cluster: Cluster, identity: SanitizerIdentity, tmp_path: Path  # noqa: F811
                  ) -> Iterator[tuple[Any, subprocess.Popen[str], Path]]:
    node = _standin_node(tmp_path)
    rendered = next(o for o in identity.manifests if o["kind"] == "ConfigMap")
    config = yaml.safe_load(next(iter(rendered["data"].values())))  # the construct's configuration ...
    config.update(node_name=NODE, state_dir=str(tmp_path / "state"), evidence_file=str(tmp_path / "evidence.jsonl"),
                  grace_period_s=0.5, drain_timeout_s=8, poll_interval_s=0.05, metrics_address="127.0.0.1",
                  metrics_port=0, proc_root=str(node.proc_root))  # ... on this machine, with the SA's kubeconfig
    config["kube"].update(mode="kubeconfig", kubeconfig=str(identity.kubeconfig), watch_timeout_s=5,
                          retry_backoff_s=0.2, request_timeout_s=5)
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(config))
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(build_zipapp())
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **node.env()}
    log = tmp_path / "agent.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-I", str(pyz), "run", "--config", str(tmp_path / "agent.yaml")],
                                   env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        yield node, process, log
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_agent_guards_and_releases_through_the_api_server_as_its_role_allows(
        cluster: Cluster, identity: SanitizerIdentity, agent_process: tuple[Any, Any, Path],  # noqa: F811
        tmp_path: Path) -> None:
    from sanitizer_runtime.standin import MiB, Tenant

    node, process, log = agent_process
    admin, rule_version = cluster.admin, cluster.target.device_taint_rule_api_version
    assert rule_version is not None
    evidence = tmp_path / "evidence.jsonl"
    # Start-up: no claim holds gpu-0, so it is sanitized once (startup) and left untainted.
    _wait(lambda: any(r["trigger"].startswith("startup") for r in _records(evidence)), 60, "the startup barrier")
    tenant: Tenant | None = None
    restarts: list[tuple[datetime, datetime]] = []
    try:
        claim = _allocated_claim(admin, "holder", "gpu-0")
        # The tenant process runs in the claim's Pod (its cgroup names the Pod's UID): the only kind
        # of process a barrier may signal.
        tenant = Tenant(node, "GPU-a", nbytes=8 * MiB, ignore_term=True, pod=claim["status"]["reservedFor"][0]["uid"])
        _wait(lambda: _taint_value(admin, rule_version) == "in-use", 30, "the in-use taint")

        cluster.stop_apiserver()  # the server goes away under the agent and comes back
        time.sleep(2)
        starting = datetime.now(UTC)
        cluster.start_apiserver()
        restarts.append((starting, datetime.now(UTC)))
        _wait(lambda: _try_admin(lambda: admin.request("GET", "/readyz")), 30, "the API server back")

        _release(admin, "holder")  # released: the barrier runs
        record = _wait(lambda: next((r for r in _records(evidence) if r["trigger"] == "deallocated"), None), 90,
                       "the release barrier")
        assert record["result"] == "released", record
        assert tenant.pid in record["pids_sigkill"]  # it ignored SIGTERM
        assert not tenant.alive()
        _wait(lambda: _rule(admin, rule_version, "gpu-0") is None, 30, "the taint lifted")
        # The next tenant's claim carries a policy the agent cannot read: guarded, and an Event says why.
        _allocated_claim(admin, "unreadable", "gpu-0", policy={"gracePeriodSeconds": -1})
        _wait(lambda: _taint_value(admin, rule_version) == "in-use", 30, "the in-use taint again")
        _wait(lambda: any(e["reason"] == "PreemptionPolicyInvalid" and "unreadable" in e["message"]
                          for e in admin.list("v1", "Event", identity.namespace)), 30, "the policy Event")
    finally:
        if tenant is not None:
            tenant.stop()
        _release(admin, "holder")
        _release(admin, "unreadable")
    assert process.poll() is None, log.read_text()[-3000:]
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0, log.read_text()[-3000:]
    text = log.read_text()
    assert "re-listing" in text or "watch failed" in text, text[-3000:]  # the restart broke the watch

    used, refused = _audited_verbs(cluster, identity, restarts)
    granted = granted_verbs(identity.manifests)
    assert refused == set(), f"the agent was refused {refused}"
    missing = {u for u in used if ("*", *u[1:]) not in granted and u not in granted}
    assert missing == set(), f"used but not granted: {missing}"
    unused = {g for g in granted if not any(u[1:] == g[1:] and g[0] in ("*", u[0]) for u in used)}
    assert unused == set(), f"granted but never used: {unused}"
    admin.delete(rule_version, "DeviceTaintRule", taint_rule_name(NODE, "gpu-0"))


def _taint_value(admin: Api, rule_version: str) -> str | None:
    rule = _rule(admin, rule_version, "gpu-0") or {}
    return ((rule.get("spec") or {}).get("taint") or {}).get("value")


def _try_admin(call: Callable[[], Any]) -> Any:
    try:
        return call() or True
    except (ApiFailure, OSError):
        return None


def _audited_verbs(control: Cluster, identity: SanitizerIdentity,
                   starting: Sequence[tuple[datetime, datetime]] = (),
                   ) -> tuple[set[tuple[str, str, str, str]], set[tuple[str, str, str, str]]]:
    """``(namespace or "*", group, resource, verb)`` the agent's token used, and those it was refused.

    A 403 while a (re)started API server was not ready yet (``starting``: from its start to its
    first ``/readyz`` 200) is not counted: its RBAC authorizer refuses everyone until its informers
    have synced, and the agent retries (seen on 1.37.2: cluster-scope pods/claims lists 3 ms apart).
    """
    assert control.audit_log is not None, "the control plane runs without an audit log"
    user = f"system:serviceaccount:{identity.namespace}:{identity.service_account}"
    used, refused = set(), set()
    time.sleep(1.0)  # the audit backend writes in batches
    for line in control.audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("stage") != "ResponseComplete" or (event.get("user") or {}).get("username") != user:
            continue
        credential = ((event["user"].get("extra") or {}).get("authentication.kubernetes.io/credential-id") or [])
        if identity.token_id and credential and identity.token_id not in credential:
            continue  # another token of this ServiceAccount (the other test)
        ref = event.get("objectRef")
        if ref is None:
            continue  # /version and other non-resource URLs: open to every authenticated user
        key = (ref.get("namespace") or "*", ref.get("apiGroup") or "", ref["resource"], event["verb"])
        used.add(key)
        if (event.get("responseStatus") or {}).get("code") == 403:
            received = datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
            if not any(start <= received <= end for start, end in starting):
                refused.add(key)
    return used, refused

