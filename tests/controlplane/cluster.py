"""A real Kubernetes control plane for the tests: etcd, kube-apiserver and, on demand, kube-scheduler and
kube-controller-manager, built by ``make controlplane`` (``scripts/build_controlplane.py``).

Everything listens on 127.0.0.1 at free ports, under one temporary folder. The API server authorizes with
RBAC (ServiceAccount tokens are checked for real, signed by a key generated for this run) and serves the DRA
APIs and feature gates of its version (``VERSIONS``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes import client

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("build_controlplane", REPO / "scripts" / "build_controlplane.py")
assert _spec is not None and _spec.loader is not None
build_controlplane = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_controlplane)


@dataclass(frozen=True)
class VersionSpec:
    """What one pinned version runs with. Gates are checked against that version's
    ``pkg/features/kube_features.go`` (an unknown gate makes the binaries exit)."""

    version: str
    feature_gates: tuple[str, ...]
    runtime_config: tuple[str, ...]


# The DRA gates of each version that are not on by default (or GA and locked on: listing them is harmless).
VERSIONS: dict[str, VersionSpec] = {
    "1.37": VersionSpec(
        "v1.37.2",
        ("DRAAdminAccess", "DRAConsumableCapacity", "DRADeviceTaints", "DRADeviceTaintRules", "DRAExtendedResource",
         "DRAPartitionableDevices", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus"),
        ("resource.k8s.io/v1beta1=true", "resource.k8s.io/v1beta2=true", "resource.k8s.io/v1alpha3=true"),
    ),
    "1.34": VersionSpec(
        "v1.34.4",
        # 1.34 has no DRADeviceTaintRules gate: DRADeviceTaints covers DeviceTaintRule (resource.k8s.io/v1alpha3).
        ("DRAAdminAccess", "DRAConsumableCapacity", "DRADeviceTaints", "DRAExtendedResource",
         "DRAPartitionableDevices", "DRAPrioritizedList", "DRAResourceClaimDeviceStatus"),
        ("resource.k8s.io/v1beta1=true", "resource.k8s.io/v1beta2=true", "resource.k8s.io/v1alpha3=true"),
    ),
}

START_TIMEOUT_S = 60.0
#: The controller manager's controllers: all on-by-default ones but those that only react to Nodes and
#: Services. The fit oracle creates ~500 Nodes without a kubelet: the node lifecycle controller then
#: marks each NotReady and taints it (the oracle's Pods tolerate every taint), the TTL controller
#: annotates each, the EndpointSlice controllers recompute for each: thousands of requests while the
#: scheduler works, and taint changes can send its unschedulable Pods back to the queue. No test needs them.
CONTROLLERS = ("*", "-node-lifecycle-controller", "-ttl-controller", "-endpointslice-controller",
               "-endpointslice-mirroring-controller")


class ControlPlaneUnavailable(RuntimeError):
    """The binaries are not built (or Go is missing): the message says what to run."""


def binary_for(version: str) -> Path:
    """The built ``kcp`` binary of ``version`` ("v1.37.2"), or ControlPlaneUnavailable naming the fix."""
    go = build_controlplane.go_version()
    if go is None:
        raise ControlPlaneUnavailable("no Go toolchain on PATH: install Go 1.26, then run `make controlplane`")
    path: Path = build_controlplane.binary_path(version, go)
    if not path.exists():
        raise ControlPlaneUnavailable(f"control plane {version} is not built: run `make controlplane`")
    return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _rsa_keypair(key_file: Path, pub_file: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    pub_file.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo))


@dataclass(frozen=True)
class Response:
    """An API server's answer: HTTP status, decoded JSON body (a Status on errors), Warning headers."""

    status: int
    body: dict[str, Any]
    warnings: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@dataclass
class ControlPlane:
    """A running control plane. ``api_client()`` talks to it as admin, ``api_client(token)`` as anyone."""

    version: str
    server: str
    kubeconfig: Path
    admin_token: str
    ca_file: Path
    workdir: Path
    binary: Path
    spec: VersionSpec
    etcd_url: str
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _tokens: dict[str, str] = field(default_factory=dict)
    start_seconds: dict[str, float] = field(default_factory=dict)
    #: How many times the API server was started; and for the scheduler and controller manager, the count
    #: when each was started (one started before a restart may still be in client-go's watch backoff).
    _apiserver_starts: int = 0
    _started_at: dict[str, int] = field(default_factory=dict)

    # ----- clients
    def api_client(self, token: str | None = None) -> client.ApiClient:
        """A client of this API server with ``token`` (default: the admin's, group system:masters)."""
        config = client.Configuration()
        config.host = self.server
        config.ssl_ca_cert = str(self.ca_file)
        config.api_key = {"authorization": token or self.admin_token}
        config.api_key_prefix = {"authorization": "Bearer"}
        return client.ApiClient(config)

    def service_account_token(self, namespace: str, name: str, expiration_seconds: int = 3600,
                              create: bool = True) -> str:
        """A bound token for ServiceAccount ``namespace/name`` (TokenRequest), creating the SA if missing."""
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            if create:
                with contextlib.suppress(client.ApiException):
                    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
                with contextlib.suppress(client.ApiException):
                    core.create_namespaced_service_account(
                        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name)))
            request = client.AuthenticationV1TokenRequest(
                spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=expiration_seconds))
            token: str = core.create_namespaced_service_account_token(name, namespace, request).status.token
            return token

    # ----- plain REST (for what the generated client lacks: fieldValidation, any kind, CRDs)
    def request(self, method: str, path: str, body: Any = None, query: dict[str, str] | None = None,
                token: str | None = None, content_type: str = "application/json") -> Response:
        """One HTTP call to the API server; ``path`` like ``/api/v1/namespaces``."""
        http = self.__dict__.setdefault("_http", urllib3.PoolManager(ca_certs=str(self.ca_file), retries=False,
                                                                     timeout=30.0))
        headers = {"Authorization": f"Bearer {token or self.admin_token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        url = self.server + path + ("?" + urllib.parse.urlencode(query) if query else "")
        resp = http.request(method, url, body=data, headers=headers)
        text = resp.data.decode(errors="replace")
        try:
            payload = json.loads(text) if text else {}
        except json.JSONDecodeError:
            payload = {"raw": text}
        return Response(resp.status, payload, tuple(resp.headers.getlist("Warning")))

    def resource_path(self, api_version: str, kind: str, namespace: str | None = None,
                      name: str | None = None) -> str:
        """The REST path of ``kind`` in ``api_version`` (discovered; KeyError when the server does not serve it)."""
        cache: dict[str, dict[str, tuple[str, bool]]] = self.__dict__.setdefault("_discovery", {})
        if api_version not in cache:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            resp = self.request("GET", base)
            cache[api_version] = {} if resp.status != 200 else {
                r["kind"]: (r["name"], r["namespaced"]) for r in resp.body["resources"] if "/" not in r["name"]}
        plural, namespaced = cache[api_version][kind]
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        path = f"{base}/namespaces/{namespace or 'default'}/{plural}" if namespaced else f"{base}/{plural}"
        return f"{path}/{name}" if name else path

    def forget_discovery(self) -> None:
        """Drop cached discovery (after creating CRDs)."""
        self.__dict__.pop("_discovery", None)

    def create(self, doc: dict[str, Any], dry_run: bool = True, strict: bool = True,
               token: str | None = None) -> Response:
        """POST ``doc`` (``dryRun=All`` and ``fieldValidation=Strict`` by default)."""
        meta = doc.get("metadata", {})
        path = self.resource_path(doc["apiVersion"], doc["kind"], meta.get("namespace"))
        query = {"fieldValidation": "Strict" if strict else "Ignore"}
        if dry_run:
            query["dryRun"] = "All"
        return self.request("POST", path, doc, query, token)

    # ----- processes
    def log_file(self, component: str) -> Path:
        return self.workdir / f"{component}.log"

    def running(self, component: str) -> bool:
        proc = self._procs.get(component)
        return proc is not None and proc.poll() is None

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each running component (from /proc/<pid>/status)."""
        out = {}
        for name, proc in self._procs.items():
            if proc.poll() is None:
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1]) * 1024
        return out

    def _spawn(self, component: str, args: list[str]) -> None:
        self._started_at[component] = self._apiserver_starts
        log = self.log_file(component).open("ab")
        self._procs[component] = subprocess.Popen([str(self.binary), component, *args], stdout=log,
                                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                  start_new_session=True)
        log.close()

    def _stop(self, component: str, timeout: float = 15.0) -> None:
        proc = self._procs.pop(component, None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def _wait(self, component: str, ready: Any, what: str) -> None:
        started = time.monotonic()
        while time.monotonic() - started < START_TIMEOUT_S:
            proc = self._procs[component]
            if proc.poll() is not None:
                tail = self.log_file(component).read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{component} {self.version} exited with {proc.returncode}:\n{tail}")
            with contextlib.suppress(Exception):
                if ready():
                    self.start_seconds[component] = time.monotonic() - started
                    return
            time.sleep(0.1)
        tail = self.log_file(component).read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{component} {self.version} not {what} after {START_TIMEOUT_S:.0f} s:\n{tail}")

    def start_etcd(self) -> None:
        data, peer = self.workdir / "etcd", f"http://127.0.0.1:{_free_port()}"
        self._spawn("etcd", [
            f"--data-dir={data}", f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync", "--log-level=warn",
        ])
        http = urllib3.PoolManager(retries=False, timeout=1.0)
        self._wait("etcd", lambda: http.request("GET", f"{self.etcd_url}/health").status == 200, "healthy")

    def _apiserver_args(self) -> list[str]:
        port = self.server.rsplit(":", 1)[1]
        gates = ",".join(f"{g}=true" for g in self.spec.feature_gates)
        return [
            f"--etcd-servers={self.etcd_url}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={port}", f"--cert-dir={self.workdir / 'pki'}",
            f"--token-auth-file={self.workdir / 'tokens.csv'}", "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.workdir / 'sa.pub'}",
            f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
            "--endpoint-reconciler-type=none",  # loopback may not be the kubernetes Service's endpoint
            *([f"--runtime-config={','.join(self.spec.runtime_config)}"] if self.spec.runtime_config else []),
            *([f"--feature-gates={gates}"] if gates else []),  # none: the release's defaults
            "--profiling=false", "--v=0",
            # DeleteCollection deletes one object at a time by default: the fit oracle's cleanup of ~500 Nodes
            # and ~700 ResourceSlices took longer than the client's 30 s timeout on a loaded 2-core machine.
            "--delete-collection-workers=8",
            # On SIGTERM the server closes its listener, then waits for open watches (the scheduler's, the
            # controller manager's: minutes) to end: without a limit it was still running when _stop's 15 s
            # ran out and got SIGKILL, 15 s per stop. With one it ends its watches and exits 0 in ~1 s.
            "--shutdown-watch-termination-grace-period=2s",
            # Every request at level Metadata (who, verb, resource, code): test_agent_apiserver.py compares
            # the agent's verbs with its RBAC. Blocking: the file is complete when a test reads it.
            f"--audit-policy-file={self._audit_policy()}", f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json", "--audit-log-mode=blocking",
        ]

    @property
    def audit_log(self) -> Path:
        """The API server's audit log (JSON lines, one event per request stage)."""
        return self.workdir / "audit.log"

    def _audit_policy(self) -> Path:
        path = self.workdir / "audit-policy.yaml"
        path.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
        return path

    def start_apiserver(self) -> None:
        """Start (or restart, on the same port and etcd) the API server and wait until /readyz is ok."""
        self._spawn("apiserver", self._apiserver_args())
        self._apiserver_starts += 1
        headers = {"Authorization": f"Bearer {self.admin_token}"}

        def ready() -> bool:  # the serving certificate (ca_file) is written just before the port opens
            http = urllib3.PoolManager(retries=False, timeout=2.0, ca_certs=str(self.ca_file))
            return http.request("GET", f"{self.server}/readyz", headers=headers).status == 200

        self._wait("apiserver", ready, "ready")

    def stop_apiserver(self) -> None:
        """Stop the API server (SIGTERM, as a rolling restart does); clients see connection errors."""
        self._stop("apiserver")

    def _component_kubeconfig(self, user: str) -> Path:
        path = self.workdir / f"{user}.kubeconfig"
        path.write_text(_kubeconfig(self.server, self.ca_file, self._tokens[user], user))
        return path

    def ensure_allocation(self) -> ControlPlane:
        """Start kube-scheduler and kube-controller-manager (claims from templates, allocation), once; and again
        where the API server restarted since (tests on this plane stop it): their watches broke, and client-go
        retries a broken watch after a backoff that grows with each failure to 30 s (a 403 while the new
        server's authorizer syncs is one more), so a component two restarts old can miss for half a minute the
        objects the next test creates (seen in CI: no claim from a template within 30 s)."""
        for component in ("controller-manager", "scheduler"):
            if self.running(component) and self._started_at.get(component, 0) < self._apiserver_starts:
                self._stop(component)
        gates = ",".join(f"{g}=true" for g in self.spec.feature_gates)
        if not self.running("controller-manager"):
            kubeconfig = self._component_kubeconfig("system:kube-controller-manager")
            self._spawn("controller-manager", [
                f"--kubeconfig={kubeconfig}", "--secure-port=0", "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                f"--root-ca-file={self.ca_file}", f"--controllers={','.join(CONTROLLERS)}", f"--feature-gates={gates}",
                "--v=0",
            ])
            # Ready when the serviceaccount controller has made the default namespace's "default" SA.
            with self.api_client() as api:
                core = client.CoreV1Api(api)
                self._wait("controller-manager", lambda: core.read_namespaced_service_account("default", "default"),
                           "running")
        if not self.running("scheduler"):
            kubeconfig = self._component_kubeconfig("system:kube-scheduler")
            self._spawn("scheduler", [f"--kubeconfig={kubeconfig}", "--secure-port=0", "--leader-elect=false",
                                      f"--feature-gates={gates}", "--v=0"])
            started = time.monotonic()
            time.sleep(0.5)  # no health port (secure-port=0): running and not exited is all there is to check
            self._wait("scheduler", lambda: time.monotonic() - started > 0.5, "running")
        return self

    def stop(self) -> None:
        for component in ("scheduler", "controller-manager", "apiserver", "etcd"):
            self._stop(component)


def _kubeconfig(server: str, ca_file: Path, token: str, user: str) -> str:
    return f"""apiVersion: v1
kind: Config
clusters:
- name: kcp
  cluster: {{server: "{server}", certificate-authority: "{ca_file}"}}
users:
- name: "{user}"
  user: {{token: "{token}"}}
contexts:
- name: kcp
  context: {{cluster: kcp, user: "{user}"}}
current-context: kcp
"""


@contextlib.contextmanager
def start_control_plane(minor: str, workdir: Path, allocation: bool = False,
                        defaults: bool = False) -> Iterator[ControlPlane]:
    """Run the control plane of ``minor`` ("1.37") under ``workdir`` for the duration of the block.

    ``defaults``: no extra feature gates and no ``--runtime-config``, the API server as the release ships it.
    """
    spec = VERSIONS[minor]
    if defaults:
        spec = VersionSpec(spec.version, (), ())
    binary = binary_for(spec.version)
    workdir.mkdir(parents=True, exist_ok=True)
    _rsa_keypair(workdir / "sa.key", workdir / "sa.pub")
    tokens = {user: secrets.token_hex(16) for user in
              ("admin", "system:kube-scheduler", "system:kube-controller-manager")}
    groups = {"admin": "system:masters"}
    lines = [f"{tok},{user},{user}" + (f',"{groups[user]}"' if user in groups else "") for user, tok in tokens.items()]
    (workdir / "tokens.csv").write_text("\n".join(lines) + "\n")  # token,user,uid[,"group1,group2"]
    ca_file = workdir / "pki" / "apiserver.crt"  # written by the API server (self-signed CA + serving cert)
    plane = ControlPlane(
        version=spec.version, server=f"https://127.0.0.1:{_free_port()}", kubeconfig=workdir / "admin.kubeconfig",
        admin_token=tokens["admin"], ca_file=ca_file, workdir=workdir, binary=binary, spec=spec,
        etcd_url=f"http://127.0.0.1:{_free_port()}", _tokens=tokens,
    )
    try:
        plane.start_etcd()
        plane.start_apiserver()
        plane.kubeconfig.write_text(_kubeconfig(plane.server, ca_file, plane.admin_token, "admin"))
        if allocation:
            plane.ensure_allocation()
        yield plane
    finally:
        plane.stop()


def ci() -> bool:
    return os.environ.get("CI") == "true"
