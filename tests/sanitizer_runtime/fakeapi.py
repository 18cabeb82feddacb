"""A tiny Kubernetes API server on 127.0.0.1 for the few endpoints the agent uses.

Serves /version, DeviceTaintRules (create/get/replace/delete), Events (create), ResourceClaims
and Pods (list, and watch as a stream of JSON lines). ``fail`` queues failures per
(method, path prefix): an HTTP status, ``"timeout"`` (answer later than the client waits) or
``"gone"`` (a watch stream that ends with an ERROR event, code 410).
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


class FakeApi:
    def __init__(self, minor: str = "34") -> None:
        self.minor = minor
        self.rules: dict[str, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.claims: list[dict[str, Any]] = []
        self.claim_events: list[dict[str, Any]] = []
        self.pods: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self.failures: dict[tuple[str, str], list[Any]] = defaultdict(list)
        self.serve_taint_rules = True
        self.delay_s = 0.0
        self._version = 100
        self._lock = threading.Lock()
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length)) if length else None

            def _send(self, code: int, obj: Any) -> None:
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                body = self._body() if method in ("POST", "PUT") else None
                with api._lock:
                    api.requests.append((method, url.path))
                    failure = None
                    for (m, prefix), queue in api.failures.items():
                        if m == method and url.path.startswith(prefix) and queue:
                            failure = queue.pop(0)
                            break
                if failure == "timeout":
                    time.sleep(1.5)
                    self._send(500, {"kind": "Status", "code": 500, "message": "too late"})
                    return
                if isinstance(failure, int):
                    self._send(failure, status(failure, f"injected {failure}", _REASONS.get(failure, "")))
                    return
                api.route(self, method, url.path, query, body, failure)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

            def do_PUT(self) -> None:
                self._handle("PUT")

            def do_DELETE(self) -> None:
                self._handle("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail(self, method: str, prefix: str, *outcomes: Any) -> None:
        self.failures[(method, prefix)].extend(outcomes)

    def next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def route(self, h: Any, method: str, path: str, query: dict[str, list[str]], body: Any, failure: Any) -> None:
        parts = path.strip("/").split("/")
        if path.rstrip("/") == "/version":
            h._send(200, {"major": "1", "minor": self.minor, "gitVersion": f"v1.{self.minor}.0"})
        elif len(parts) == 3 and parts[:2] == ["apis", "resource.k8s.io"] and method == "GET":
            # Discovery of the group version: an APIResourceList (devicetaintrules only while served).
            resources = [{"name": "resourceclaims", "singularName": "resourceclaim", "namespaced": True,
                          "kind": "ResourceClaim",
                          "verbs": ["get", "list", "watch"]}]
            if self.serve_taint_rules:
                resources.append({"name": "devicetaintrules", "singularName": "devicetaintrule", "namespaced": False,
                                  "kind": "DeviceTaintRule",
                                  "verbs": ["create", "delete", "get", "list", "update", "watch"]})
            h._send(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"resource.k8s.io/{parts[2]}",
                          "resources": resources})
        elif len(parts) >= 4 and parts[:2] == ["apis", "resource.k8s.io"] and parts[3] == "devicetaintrules":
            if not self.serve_taint_rules:  # what kube-apiserver answers for a resource it does not serve
                h._send(404, status(404, "the server could not find the requested resource", "NotFound"))
                return
            name = parts[4] if len(parts) > 4 else None
            with self._lock:
                if method == "POST":
                    if body["metadata"]["name"] in self.rules:
                        h._send(409, status(409, f'devicetaintrules.resource.k8s.io "{body["metadata"]["name"]}" '
                                            "already exists", "AlreadyExists", body["metadata"]["name"]))
                        return
                    body["metadata"]["resourceVersion"] = self.next_version()
                    self.rules[body["metadata"]["name"]] = body
                    h._send(201, body)
                elif method == "GET" and name is None:  # a list: labelSelector "k=v,k=v" (equality only)
                    terms = [t.split("=", 1) for t in (query.get("labelSelector") or [""])[0].split(",") if t]
                    items = [r for r in self.rules.values()
                             if all(r["metadata"].get("labels", {}).get(k) == v for k, v in terms)]
                    h._send(200, {"kind": "DeviceTaintRuleList", "metadata": {"resourceVersion": self.next_version()},
                                  "items": items})
                elif method == "GET" and name in self.rules:
                    h._send(200, self.rules[name])
                elif method == "PUT" and name in self.rules:
                    if body["metadata"].get("resourceVersion") != self.rules[name]["metadata"]["resourceVersion"]:
                        h._send(409, status(409, f'Operation cannot be fulfilled on devicetaintrules.resource.k8s.io '
                                            f'"{name}": the object has been modified', "Conflict", name))
                        return
                    body["metadata"]["resourceVersion"] = self.next_version()
                    self.rules[name] = body
                    h._send(200, body)
                elif method == "DELETE" and name in self.rules:
                    h._send(200, self.rules.pop(name))
                else:
                    h._send(404, status(404, f'devicetaintrules.resource.k8s.io "{name}" not found', "NotFound", name))
        elif len(parts) == 5 and parts[:2] == ["api", "v1"] and parts[4] == "events" and method == "POST":
            # As kube-apiserver validates a core/v1 Event without eventTime (pkg/apis/core/validation/
            # events.go, legacyValidateEvent): an object without namespace only in "default" (or
            # none), else involvedObject.namespace must be the Event's namespace.
            involved = (body.get("involvedObject") or {}).get("namespace") or "default"
            if involved != parts[3]:
                h._send(422, {"kind": "Status", "code": 422, "reason": "Invalid",
                              "message": "involvedObject.namespace: does not match event.namespace"})
                return
            with self._lock:
                self.events.append(body)
            h._send(201, body)
        elif parts[-1] in ("resourceclaims", "pods") and method == "GET":
            items = self.claims if parts[-1] == "resourceclaims" else self.pods
            if query.get("watch") == ["true"]:
                self._stream(h, self.claim_events if parts[-1] == "resourceclaims" else [], failure == "gone")
            else:
                h._send(200, {"kind": "List", "metadata": {"resourceVersion": self.next_version()}, "items": items})
        else:
            h._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})

    def _stream(self, h: Any, events: list[dict[str, Any]], gone: bool) -> None:
        lines = [json.dumps(e) for e in events]
        if gone:
            lines.append(json.dumps({"type": "ERROR", "object": {
                "kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}}))
        data = ("\n".join(lines) + "\n").encode() if lines else b""
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


_REASONS = {404: "NotFound", 409: "AlreadyExists", 429: "TooManyRequests", 500: "InternalError",
            503: "ServiceUnavailable"}


def status(code: int, message: str, reason: str, name: str | None = None) -> dict[str, Any]:
    """A metav1.Status failure body as kube-apiserver sends it (details name the object, where one is meant)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason, "code": code}
    if name is not None:
        body["details"] = {"name": name, "group": "resource.k8s.io", "kind": "devicetaintrules"}
    return body


def claim(name: str, namespace: str, uid: str, devices: list[str], node: str = "node-a",
          reserved: list[str] | None = None, driver: str = "gpu.nvidia.com") -> dict[str, Any]:
    """A ResourceClaim allocated to ``devices`` of ``driver`` in pool ``node``."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "5"},
        "status": {
            "allocation": {"devices": {"results": [
                {"request": "gpu", "driver": driver, "pool": node, "device": d} for d in devices]}},
            "reservedFor": [{"resource": "pods", "name": f"pod-{u}", "uid": u} for u in (reserved or [])],
        },
    }
