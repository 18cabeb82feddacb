"""Every document in dist/ is created on a real API server of its target: server-side dry-run
(``dryRun=All``) with ``fieldValidation=Strict``, so validation, defaulting, admission and unknown or
duplicate fields are the API server's own verdict. 0 rejections.

Which target meets which server (docs/controlplane.md): each target folder goes to the oldest server
at or above its version, with the older ``resource.k8s.io`` versions enabled by ``--runtime-config``,
and to the newest server (a cluster upgraded under the same manifests). Namespaces, ServiceAccounts
and CRDs are created for real (later objects need them: NamespaceLifecycle, the ServiceAccount
admission of Pods, a CRD's REST endpoint); when one already exists from an earlier file it is checked
by a dry-run server-side apply instead. Namespaces the files use but do not define, and their
``default`` ServiceAccount (the controller-manager's job), are created first as preconditions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from controlplane.cluster import VERSIONS, ControlPlane, Response, ci

REPO = Path(__file__).resolve().parents[2]
DIST = REPO / "dist"
KUEUE_CRDS = REPO.parent / "shared" / "schemas" / "kueue"
DEFAULT_TARGET = "1.32"  # dist/<example>/; dist/k8s-1.NN/<example>/ holds target 1.NN (examples/main.py)
REAL_KINDS = {"Namespace", "ServiceAccount", "CustomResourceDefinition"}

pytestmark = pytest.mark.controlplane


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def servers_for(target: str) -> list[str]:
    """The oldest server at or above ``target``, and the newest."""
    servers = sorted(VERSIONS, key=_minor)
    oldest = next((s for s in servers if _minor(s) >= _minor(target)), servers[-1])
    return sorted({oldest, servers[-1]}, key=_minor)


def target_of(path: Path) -> str:
    top = path.relative_to(DIST).parts[0]
    match = re.fullmatch(r"k8s-(1\.\d+)", top)
    return match.group(1) if match else DEFAULT_TARGET


def _cases() -> Iterator[Any]:
    for path in sorted(DIST.rglob("*.yaml")):
        target = target_of(path)
        for server in servers_for(target):
            group = f"kcp-{server}"
            yield pytest.param(server, path, id=f"{server}-server/{path.relative_to(DIST)}",
                               marks=pytest.mark.xdist_group(group))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _describe(doc: dict[str, Any], resp: Response) -> str:
    meta = doc.get("metadata", {})
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{doc['apiVersion']} {doc['kind']} {where}{meta.get('name')}: HTTP {resp.status} " \
           f"{resp.body.get('message', resp.body)}"


def _ensure(plane: ControlPlane, doc: dict[str, Any]) -> Response:
    """Create ``doc`` for real; if it exists, validate it by a dry-run server-side apply."""
    resp = plane.create(doc, dry_run=False)
    return resp if resp.status != 409 else _apply_dry_run(plane, doc)


def _dry_run(plane: ControlPlane, doc: dict[str, Any]) -> Response:
    """A dry-run create; an object that exists already (another test of this server created it for
    real, e.g. the agent test the sanitizer's RBAC) is validated by a dry-run server-side apply."""
    resp = plane.create(doc)
    return resp if resp.status != 409 else _apply_dry_run(plane, doc)


def _apply_dry_run(plane: ControlPlane, doc: dict[str, Any]) -> Response:
    meta = doc["metadata"]
    path = plane.resource_path(doc["apiVersion"], doc["kind"], meta.get("namespace"), meta["name"])
    return plane.request("PATCH", path, doc, {"dryRun": "All", "fieldValidation": "Strict",
                                              "fieldManager": "dra-constructs-tests", "force": "true"},
                         content_type="application/apply-patch+yaml")


def _precondition(plane: ControlPlane, doc: dict[str, Any]) -> None:
    resp = plane.create(doc, dry_run=False)
    assert resp.ok or resp.status == 409, _describe(doc, resp)


def _prepare(plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    defined = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
    used = {d["metadata"]["namespace"] for d in docs if d.get("metadata", {}).get("namespace")}
    for ns in sorted(used | defined):
        if ns not in defined:
            _precondition(plane, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    if any(d["apiVersion"].startswith("kueue.x-k8s.io/") for d in docs):
        if not KUEUE_CRDS.is_dir():
            if ci():
                pytest.fail(f"CI=true needs Kueue's CRDs at {KUEUE_CRDS}")
            pytest.skip(f"Kueue objects need Kueue's CRDs from {KUEUE_CRDS} (../shared is missing)")
        for crd_file in sorted(KUEUE_CRDS.glob("*.yaml")):
            for crd in _docs(crd_file):
                _precondition(plane, crd)
        _wait_established(plane, [d for d in docs if d["apiVersion"].startswith("kueue.x-k8s.io/")])


def _wait_established(plane: ControlPlane, docs: list[dict[str, Any]]) -> None:
    deadline = time.monotonic() + 30
    while True:
        plane.forget_discovery()
        try:
            for doc in docs:
                plane.resource_path(doc["apiVersion"], doc["kind"])
            return
        except KeyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _default_service_account(plane: ControlPlane, namespace: str) -> None:
    _precondition(plane, {"apiVersion": "v1", "kind": "ServiceAccount",
                          "metadata": {"name": "default", "namespace": namespace}})


@pytest.mark.parametrize(("server", "path"), list(_cases()))
def test_dist_file_is_accepted_by_the_real_api_server(server: str, path: Path, request: pytest.FixtureRequest) -> None:
    plane: ControlPlane = request.getfixturevalue(f"control_plane_{server.replace('.', '')}")
    docs = _docs(path)
    _prepare(plane, docs)
    rejected, warnings = [], []
    for doc in docs:
        if doc["kind"] in REAL_KINDS:
            resp = _ensure(plane, doc)
            if doc["kind"] == "Namespace" and resp.ok:
                _default_service_account(plane, doc["metadata"]["name"])
        else:
            if doc.get("metadata", {}).get("namespace"):
                _default_service_account(plane, doc["metadata"]["namespace"])
            resp = _dry_run(plane, doc)
        if not resp.ok:
            rejected.append(_describe(doc, resp))
        warnings += [f"{doc['kind']} {doc['metadata'].get('name')}: {w}" for w in resp.warnings]
    if warnings:
        print(f"{path.relative_to(DIST)} on {plane.version}: warnings\n  " + "\n  ".join(warnings))
    assert not rejected, f"{plane.version} rejects {len(rejected)} of {len(docs)} documents of " \
                         f"{path.relative_to(DIST)} (target {target_of(path)}):\n" + "\n".join(rejected)
