"""A small JSON client for the tests' API server: objects as dicts, paths from apiVersion/kind.

The tests create thousands of plain objects; the ``kubernetes`` client's model classes would
only be converted back to dicts, so this speaks REST through ``requests`` (a maintained HTTP
library, already installed with ``kubernetes``). Not for the product: the agent keeps its own
client (``dra_constructs.agent.kube``), which these tests exercise as it is.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import requests
import urllib3
import yaml
from requests.adapters import HTTPAdapter

__all__ = ["PLURALS", "Api", "ApiFailure", "in_parallel"]

T = TypeVar("T")

#: kind -> (plural, namespaced) for the kinds the tests create.
PLURALS: dict[str, tuple[str, bool]] = {
    "Namespace": ("namespaces", False), "Node": ("nodes", False), "Pod": ("pods", True),
    "ServiceAccount": ("serviceaccounts", True), "ConfigMap": ("configmaps", True), "Event": ("events", True),
    "Secret": ("secrets", True), "Service": ("services", True),
    "ClusterRole": ("clusterroles", False), "ClusterRoleBinding": ("clusterrolebindings", False),
    "Role": ("roles", True), "RoleBinding": ("rolebindings", True),
    "ResourceClaim": ("resourceclaims", True), "ResourceClaimTemplate": ("resourceclaimtemplates", True),
    "ResourceSlice": ("resourceslices", False), "DeviceClass": ("deviceclasses", False),
    "DeviceTaintRule": ("devicetaintrules", False),
    "DaemonSet": ("daemonsets", True), "Deployment": ("deployments", True), "Job": ("jobs", True),
    "NetworkPolicy": ("networkpolicies", True), "PriorityClass": ("priorityclasses", False),
    "RuntimeClass": ("runtimeclasses", False),
    "ValidatingAdmissionPolicy": ("validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("validatingadmissionpolicybindings", False),
}


class ApiFailure(Exception):
    """An answer outside 2xx: ``status`` and the server's Status object (or text)."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        message = body.get("message") if isinstance(body, dict) else body
        super().__init__(f"{method} {path}: HTTP {status}: {message}")


def collection_path(api_version: str, kind: str, namespace: str | None = None) -> str:
    """``/api/v1/namespaces/ns/pods`` style path of a kind's collection."""
    plural, namespaced = PLURALS[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced and namespace:
        return f"{base}/namespaces/{namespace}/{plural}"
    return f"{base}/{plural}"


class Api:
    """One server, one identity (a bearer token or a client certificate)."""

    def __init__(self, server: str, *, token: str | None = None, cert: tuple[str, str] | None = None,
                 ca: str | None = None, timeout_s: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self.timeout_s = timeout_s
        self._session = requests.Session()
        self._session.trust_env = False  # REQUESTS_CA_BUNDLE / proxies from the environment would override ours
        self._session.mount("https://", HTTPAdapter(pool_connections=4, pool_maxsize=32))
        self._session.mount("http://", HTTPAdapter(pool_connections=4, pool_maxsize=32))
        if token:
            self._session.headers["Authorization"] = f"Bearer {token}"
        if cert:
            self._session.cert = cert
        self._session.verify = ca if ca else False
        if not ca:
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    @classmethod
    def from_kubeconfig(cls, path: str | Path, scratch: Path) -> Api:
        """The current context of a kubeconfig (token or client certificate; inline data go to ``scratch``)."""
        config = yaml.safe_load(Path(path).read_text())
        context_name = config.get("current-context") or config["contexts"][0]["name"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next((u["user"] for u in config.get("users") or [] if u["name"] == context.get("user")), {})
        base = Path(path).parent

        def file_of(key: str, where: Mapping[str, Any]) -> str | None:
            if where.get(f"{key}-data"):
                target = scratch / f"{key}.pem"
                target.write_bytes(base64.b64decode(where[f"{key}-data"]))
                return str(target)
            value = where.get(key)
            return str(base / value) if value else None

        scratch.mkdir(parents=True, exist_ok=True)
        cert, key = file_of("client-certificate", user), file_of("client-key", user)
        ca = None if cluster.get("insecure-skip-tls-verify") else file_of("certificate-authority", cluster)
        return cls(cluster["server"], token=user.get("token"), cert=(cert, key) if cert and key else None, ca=ca)

    def with_token(self, token: str) -> Api:
        """The same server under another identity."""
        verify = self._session.verify
        return Api(self.server, token=token, ca=verify if isinstance(verify, str) else None, timeout_s=self.timeout_s)

    def request(self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None,
                content_type: str = "application/json") -> Any:
        response = self._session.request(method, self.server + path, json=body, params=params,
                                         headers={"Content-Type": content_type} if body is not None else None,
                                         timeout=self.timeout_s)
        try:
            data = response.json()
        except ValueError:
            data = response.text
        if response.status_code >= 300:
            raise ApiFailure(method, path, response.status_code, data)
        return data

    def create(self, obj: Mapping[str, Any], namespace: str | None = None, *, exist_ok: bool = False,
               params: Mapping[str, Any] | None = None) -> Any:
        namespace = namespace or (obj.get("metadata") or {}).get("namespace")
        path = collection_path(obj["apiVersion"], obj["kind"], namespace)
        try:
            return self.request("POST", path, obj, params)
        except ApiFailure as failure:
            if exist_ok and failure.status == 409:
                return None
            raise

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        return self.request("GET", f"{collection_path(api_version, kind, namespace)}/{name}")

    def list(self, api_version: str, kind: str, namespace: str | None = None, **params: Any) -> list[Any]:
        data = self.request("GET", collection_path(api_version, kind, namespace), params=params or None)
        return list(data.get("items") or [])

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None, *,
               missing_ok: bool = True, **params: Any) -> None:
        try:
            self.request("DELETE", f"{collection_path(api_version, kind, namespace)}/{name}", params=params or None)
        except ApiFailure as failure:
            if not (missing_ok and failure.status == 404):
                raise

    def delete_collection(self, api_version: str, kind: str, namespace: str | None = None, **params: Any) -> None:
        self.request("DELETE", collection_path(api_version, kind, namespace), params=params or None)


def in_parallel(fn: Callable[[T], Any], items: Iterable[T], threads: int = 16) -> list[Any]:
    """``fn`` over ``items`` on a thread pool (the API server answers concurrently); results in order."""
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, items))
