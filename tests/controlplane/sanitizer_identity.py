"""The sanitizer agent's identity on a real API server, as the ``SanitizerDaemonSet`` construct renders it.

The chart is synthesized here (the construct, not a copy of its YAML) for the server's version;
its Namespace, ServiceAccount and RBAC are created by the admin, and a token for that
ServiceAccount is minted through TokenRequest. The agent then talks to the server with that
token only, through a kubeconfig like the one ``kubectl`` would use.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cdk8s
import yaml

from dra_constructs import set_kubernetes_version
from dra_constructs.constructs.sanitizer.construct import SanitizerDaemonSet

from .apiclient import Api

__all__ = ["RBAC_KINDS", "SanitizerIdentity", "granted_verbs", "install_identity", "render_chart"]

#: What the agent's identity consists of (the DaemonSet and its ConfigMap are not needed to talk).
RBAC_KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def render_chart(version: str) -> list[dict[str, Any]]:
    """The manifests of a default ``SanitizerDaemonSet`` for Kubernetes ``version``."""
    app = cdk8s.App()
    set_kubernetes_version(app, version)
    chart = cdk8s.Chart(app, "gpu-sanitizer")
    SanitizerDaemonSet(chart, "sanitizer", image="registry.example.com/dra-sanitizer-base:0.1.0",
                       image_digest="sha256:" + "0" * 64)  # the construct refuses an unpinned image
    return [dict(o) for o in chart.to_json()]


def granted_verbs(manifests: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """``(namespace or "*", group, resource, verb)`` the rendered (Cluster)Roles grant."""
    granted = set()
    for obj in manifests:
        if obj["kind"] not in ("ClusterRole", "Role"):
            continue
        scope = "*" if obj["kind"] == "ClusterRole" else obj["metadata"]["namespace"]
        for rule in obj.get("rules") or []:
            assert not rule.get("resourceNames"), rule  # name-scoped grants would need a finer comparison
            for group in rule.get("apiGroups") or []:
                for resource in rule.get("resources") or []:
                    for verb in rule.get("verbs") or []:
                        granted.add((scope, group, resource, verb))
    return granted


@dataclass
class SanitizerIdentity:
    """The agent's ServiceAccount on the server: its token, a kubeconfig and its namespace."""

    namespace: str
    service_account: str
    token: str
    token_id: str | None
    kubeconfig: Path
    manifests: list[dict[str, Any]]
    api: Api


def _token_id(token: str) -> str | None:
    """The JWT id the audit log records as ``authentication.kubernetes.io/credential-id`` (``JTI=<id>``)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    jti = claims.get("jti")
    return f"JTI={jti}" if jti else None


def install_identity(admin: Api, manifests: list[dict[str, Any]], scratch: Path,
                     ca_file: str | None) -> SanitizerIdentity:
    """Create the chart's identity objects (idempotent), mint a fresh token, write a kubeconfig for it."""
    for obj in manifests:
        if obj["kind"] in RBAC_KINDS:
            admin.create(obj, exist_ok=True)
    account = next(o for o in manifests if o["kind"] == "ServiceAccount")
    namespace, name = account["metadata"]["namespace"], account["metadata"]["name"]
    answer = admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})
    token = answer["status"]["token"]
    cluster: dict[str, Any] = {"server": admin.server}
    if ca_file:
        cluster["certificate-authority"] = ca_file
    else:
        cluster["insecure-skip-tls-verify"] = True
    scratch.mkdir(parents=True, exist_ok=True)
    kubeconfig = scratch / "sanitizer.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sanitizer",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "sanitizer", "user": {"token": token}}],
        "contexts": [{"name": "sanitizer", "context": {"cluster": "test", "user": "sanitizer"}}]}))
    return SanitizerIdentity(namespace, name, token, _token_id(token), kubeconfig, manifests,
                             admin.with_token(token))
