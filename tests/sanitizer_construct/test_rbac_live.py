"""The RBAC the construct grants is exactly what the agent uses: run it against a recording API.

The agent (the zipapp extracted from the synthesized ConfigMap, with the synthesized config)
runs ``run`` on the simulated backend against a small local API server that records every
request. Each request is turned into RBAC attributes (verb, group, resource, namespace) and
checked against the synthesized ClusterRole and Role; every granted verb must be used too.
No maintained library maps HTTP requests to RBAC attributes offline, so ``_attributes`` does
it by hand for the handful of URL shapes the Kubernetes API has.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from .helpers import build, extract_bundle, one

NODE = "node-a"
DEVICE = "gpu-0"
ATTEMPT_LIMIT_S = 30.0


class _Api:
    """The recorded requests and the canned answers of the fake API server."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.created: set[str] = set()
        self.lock = threading.Lock()

    def claim(self) -> dict[str, Any]:
        return {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "tenant-claim", "namespace": "team-a", "uid": "uid-1", "resourceVersion": "5"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": NODE, "device": DEVICE}]}}},
        }

    def answer(self, method: str, url: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any] | None]:
        with self.lock:
            self.requests.append((method, url))
        parts = urlsplit(url)
        path, query = parts.path, parse_qs(parts.query)
        watching = query.get("watch", [""])[0].lower() in ("true", "1")
        if path == "/version":
            return 200, {"major": "1", "minor": "34"}
        if path.endswith("/resourceclaims") or path == "/api/v1/pods":
            if watching:
                time.sleep(0.3)
                return 200, None  # an empty watch: the server-side timeout passed
            items = [self.claim()] if path.endswith("/resourceclaims") else []
            return 200, {"kind": "List", "metadata": {"resourceVersion": "10"}, "items": items}
        if "/devicetaintrules" in path:
            name = path.rsplit("/", 1)[1]
            if method == "POST":
                assert body is not None
                name = body["metadata"]["name"]
                with self.lock:
                    first = name not in self.created
                    self.created.add(name)
                return (409, {"kind": "Status", "code": 409}) if first else (201, body)
            if method == "GET":
                return 200, {"metadata": {"name": name, "resourceVersion": "7"}}
            return 200, body or {"kind": "Status", "code": 200}
        if path.endswith("/events") and method == "POST":
            return 201, body
        return 404, {"kind": "Status", "code": 404}


def _server(api: _Api) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, answer = api.answer(self.command, self.path, body)
            data = json.dumps(answer).encode() if answer is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _attributes(method: str, url: str) -> tuple[str, str, str, str] | None:
    """(verb, apiGroup, resource, namespace) of a resource request; None for non-resource URLs."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    if segments[:2] == ["api", "v1"]:
        group, rest = "", segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        group, rest = segments[1], segments[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces" and len(rest) != 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
    watching = parse_qs(parts.query).get("watch", [""])[0].lower() in ("true", "1")
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method)
    if verb is None:
        if method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            verb = "get" if name else ("watch" if watching else "list")
    return verb, group, resource, namespace


def _grants(docs: list[dict[str, Any]]) -> Iterator[tuple[str, str, str, str | None]]:
    """(verb, group, resource, namespace or None for cluster-wide) of every synthesized rule."""
    for kind, namespace in (("ClusterRole", None), ("Role", one(docs, "Role")["metadata"]["namespace"])):
        for rule in one(docs, kind)["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        yield verb, group, resource, namespace


def _run_agent(docs: list[dict[str, Any]], folder: Path, **changes: Any) -> list[tuple[str, str]]:
    """Run the extracted agent against a recording API until it has done a full cycle."""
    api = _Api()
    server = _server(api)
    zipapp, config = extract_bundle(docs, folder)
    data = yaml.safe_load(config.read_text())
    data.update(state_dir=str(folder / "state"), evidence_file=str(folder / "evidence.jsonl"), metrics_port=0,
                metrics_address="127.0.0.1", simulated={"gpus": 2, "mig_slices_per_gpu": 0}, **changes)
    # gpu-0 is held by the claim (guarded, never sanitized under a live tenant); gpu-1 is free: sanitized.
    data["kube"].update(mode="url", url=f"http://127.0.0.1:{server.server_port}", retries=0, watch_timeout_s=1)
    local = folder / "local.yaml"
    local.write_text(yaml.safe_dump(data))
    log = (folder / "agent.log").open("w")
    agent = subprocess.Popen([sys.executable, str(zipapp), "run", "--config", str(local), "--backend", "simulated",
                              "--node", NODE], stdout=log, stderr=subprocess.STDOUT)
    done = ("POST", "/events") if changes.get("require_scrub_on_free") else ("DELETE", "/devicetaintrules")
    deadline = time.monotonic() + ATTEMPT_LIMIT_S
    try:
        while time.monotonic() < deadline and agent.poll() is None:
            with api.lock:
                seen = list(api.requests)
            watched = {u.split("?")[0].rsplit("/", 1)[1] for m, u in seen if "watch=" in u.lower()}
            if {"pods", "resourceclaims"} <= watched and any(m == done[0] and done[1] in u for m, u in seen):
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the agent did not finish a cycle: {(folder / 'agent.log').read_text()[-3000:]}")
    finally:
        agent.send_signal(signal.SIGTERM)
        try:
            agent.wait(timeout=15)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        log.close()
        server.shutdown()
        server.server_close()
    return api.requests


@pytest.mark.slow
def test_agent_requests_are_granted_and_every_grant_is_used(tmp_path: Path) -> None:
    _, docs = build("1.34")
    docs = list(yaml.safe_load_all(yaml.safe_dump_all(docs)))
    normal, quarantine = tmp_path / "normal", tmp_path / "quarantine"
    normal.mkdir()
    quarantine.mkdir()
    requests = _run_agent(docs, normal) + _run_agent(docs, quarantine, require_scrub_on_free=True)
    grants = set(_grants(docs))
    used: set[tuple[str, str, str, str | None]] = set()
    for method, url in requests:
        attributes = _attributes(method, url)
        if attributes is None:
            assert urlsplit(url).path == "/version", url  # readable by every authenticated user
            continue
        verb, group, resource, namespace = attributes
        grant = next((g for g in grants if g[:3] == (verb, group, resource) and g[3] in (None, namespace)), None)
        assert grant is not None, f"{method} {url} needs {verb} {group or 'core'}/{resource}: not granted"
        used.add(grant)
    assert used == grants, f"granted but never used: {sorted(map(str, grants - used))}"
