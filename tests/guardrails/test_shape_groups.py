"""Set rules judge each shape once (issue 25): an answer shared by a shape's objects never reaches another's.

``AuditContext.groups`` puts objects of one shape key together and the set rules (DRA009's tenant
listing, DRA014's queues, DRA006's shared claims, DRA013, DRA021, DRA012) judge the first object of
each group and report every member. Objects that differ in what a set rule reads - namespace (quota,
LocalQueue, tenant namespace, claims there), tenant label - must land in different groups. These
tests compare the streamed command path (slim copies, shapes, groups) with an audit of every object on
its own (``memoize=False``: each object its own group), on the fixtures with clones and with variants
that differ from a workload only in namespace or tenant label, and check the findings of a set built so
that a leak would show.
"""

from __future__ import annotations

import copy
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs._io import ReadBudget
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails.cli import _spans
from dra_constructs.guardrails.engine import AuditResult
from dra_constructs.guardrails.locate import with_field_lines
from dra_constructs.guardrails.shape_key import MEMOIZED_KINDS
from dra_constructs.guardrails.skipped import SkippedInput
from dra_constructs.guardrails.stream import Collector, stream_paths

from .helpers import FIXTURES


def _streamed(path: Path, tmp: Path, scope: str = "set") -> AuditResult:
    """What ``dra-constructs audit`` computes: streamed into slim copies, memoized, grouped, located."""
    skipped: list[SkippedInput] = []
    errors: list[DraConstructsError] = []
    sources: dict[str, str] = {}
    collector = Collector()
    stream_paths([str(path)], collector, None, skipped=skipped, errors=errors, budget=ReadBudget.of(None),
                 sources=sources, spool_dir=str(tmp))
    assert not errors and not skipped
    result = audit(collector.manifests, kubernetes_version="1.34", tenant_scope=scope)
    return with_field_lines(result, spans=_spans(collector.manifests, result), sources=sources)


def _each_alone(path: Path, scope: str = "set") -> AuditResult:
    """Every object judged on its own (no shapes, no groups), lines located from the text."""
    texts: dict[str, str] = {}
    manifests = load_paths([str(path)], io.StringIO(""), texts=texts, max_bytes=None)
    return with_field_lines(audit(manifests, kubernetes_version="1.34", tenant_scope=scope, memoize=False), texts)


def _fixture_objects() -> list[dict[str, Any]]:
    return [m.obj for m in load_paths([str(FIXTURES / "noncompliant"), str(FIXTURES / "compliant")],
                                      max_bytes=None)]


def _variants(obj: dict[str, Any], namespaces: list[str]) -> list[dict[str, Any]]:
    """``obj``, two clones of it (identity only), and copies that differ in namespace or tenant label."""
    out = [obj]
    for n in range(2):
        clone = copy.deepcopy(obj)
        clone["metadata"]["name"] = f"{obj['metadata'].get('name', 'x')}-clone-{n}"
        clone["metadata"]["uid"] = f"uid-{n}"
        clone["status"] = {"phase": "Running"}
        out.append(clone)
    for namespace in namespaces:
        if namespace != obj["metadata"].get("namespace"):
            moved = copy.deepcopy(obj)
            moved["metadata"]["namespace"] = namespace
            out.append(moved)
    for tenant in ("blue", "green"):
        other = copy.deepcopy(obj)
        other["metadata"]["name"] = f"{obj['metadata'].get('name', 'x')}-{tenant}"
        labels = other["metadata"].setdefault("labels", {})
        if isinstance(labels, dict):
            labels["tenant"] = tenant
        out.append(other)
    return out


def _export_with_variants() -> dict[str, Any]:
    objects = _fixture_objects()
    # the namespaces set rules tell apart: with a quota, a LocalQueue, a tenant label, claims
    namespaces = sorted({str(o["metadata"]["namespace"]) for o in objects
                         if o.get("kind") in ("ResourceQuota", "LocalQueue", "ResourceClaim")
                         and isinstance(o.get("metadata"), dict) and o["metadata"].get("namespace")})
    assert len(namespaces) >= 3
    items: list[dict[str, Any]] = []
    for obj in objects:
        if obj.get("kind") in MEMOIZED_KINDS and isinstance(obj.get("metadata"), dict):
            items += _variants(obj, namespaces)
        else:
            items.append(obj)
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


@pytest.mark.parametrize("indent", [4, None], ids=["kubectl", "one-line"])
@pytest.mark.parametrize("scope", ["set", "file"])
def test_variants_of_a_shape_get_their_own_answers(tmp_path: Path, indent: int | None, scope: str) -> None:
    """Fixture workloads with clones and copies in other namespaces / of other tenants: the same findings as
    judging every object alone. (One line: every object on line 1, where each is its own group.)"""
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_export_with_variants(), indent=indent))
    grouped = _streamed(path, tmp_path, scope)
    alone = _each_alone(path, scope)
    assert grouped.to_dict() == alone.to_dict()
    assert {f.rule for f in grouped.findings} >= {"DRA006", "DRA009", "DRA012", "DRA013", "DRA014"}


_SET = """
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpus, namespace: capped}
spec: {hard: {gpu.nvidia.com.deviceclass.resource.k8s.io/devices: "1"}}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: gpu, namespace: queued}
spec: {clusterQueue: gpus}
---
apiVersion: v1
kind: Namespace
metadata: {name: owner, labels: {dra-constructs.io/tenant: owner}}
---
apiVersion: v1
kind: Namespace
metadata: {name: borrower, labels: {dra-constructs.io/tenant: borrower}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu, namespace: owner}
spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]}}
"""


def _template(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu", "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}


def _pod(name: str, namespace: str, *, tenant: str = "", claim: str = "") -> dict[str, Any]:
    source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": "gpu"}
    labels = {"app": "train", **({"tenant": tenant} if tenant else {})}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels},
            "spec": {"nodeName": f"node-{name}", "terminationGracePeriodSeconds": 30,
                     "resourceClaims": [{"name": "gpu", **source}],
                     "containers": [{"name": "c", "image": "train:1", "resources": {"claims": [{"name": "gpu"}]}}]},
            "status": {"phase": "Running"}}


def test_same_spec_other_namespace_or_tenant_is_judged_on_its_own(tmp_path: Path) -> None:
    """Pods alike but for their namespace or tenant label: only those in the quota's namespace count against it,
    only those in the LocalQueue's namespace miss a queue, only the two tenants' pods share a claim."""
    items: list[dict[str, Any]] = list(yaml.safe_load_all(_SET))
    items += [_template(ns) for ns in ("capped", "free", "queued")]
    for ns in ("capped", "free", "queued"):
        items += [_pod(f"{ns}-{i}", ns) for i in range(3)]
    # one claim in platform, used by two tenants' pods (DRA006); the same pods of one tenant alone elsewhere
    items.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                  "metadata": {"name": "one", "namespace": "platform"},
                  "spec": {"devices": {"requests": [{"name": "gpu",
                                                     "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}})
    items.append({**copy.deepcopy(items[-1]), "metadata": {"name": "one", "namespace": "solo"}})
    items += [_pod(f"p-{t}-{i}", "platform", tenant=t, claim="one") for t in ("blue", "green") for i in range(2)]
    items += [_pod(f"s-{i}", "solo", tenant="blue", claim="one") for i in range(2)]
    # pods naming another tenant's claim (DRA013) in a tenant namespace, and alike in a plain one
    items += [_pod(f"b-{i}", "borrower", claim="shared-gpu") for i in range(2)]
    items += [_pod(f"x-{i}", "plain", claim="shared-gpu") for i in range(2)]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    grouped = _streamed(path, tmp_path)
    assert grouped.to_dict() == _each_alone(path).to_dict()

    def named(rule: str, text: str = "") -> set[str]:
        return {f.name for f in grouped.findings if f.rule == rule and text in f.message}

    quota = [f for f in grouped.findings if f.rule == "DRA012" and "ResourceQuota 'gpus'" in f.message]
    assert len(quota) == 1 and "needs 3 of" in quota[0].message, [f.message for f in quota]
    assert all("/capped-" in line for line in quota[0].details if line.startswith("Pod/"))
    assert named("DRA014", "names no queue") == {"queued-0", "queued-1", "queued-2"}
    assert named("DRA006", "shared by workloads of tenants") == {f"p-{t}-{i}" for t in ("blue", "green")
                                                                 for i in range(2)}
    assert named("DRA013") == {"b-0", "b-1"}
    barrier = [f for f in grouped.findings if f.rule == "DRA009"]
    assert len(barrier) == 1 and barrier[0].count == len([i for i in items if i["kind"] == "Pod"])


@pytest.mark.parametrize("seed", [1, 2])
def test_objects_out_of_file_order_give_the_same_findings(tmp_path: Path, seed: int) -> None:
    """Manifests of several files handed over in no order (lines do not grow, files alternate): groups and
    the sample of grouped findings are the same as object by object."""
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    export = _export_with_variants()
    half = len(export["items"]) // 2
    first.write_text(json.dumps({**export, "items": export["items"][:half]}, indent=2))
    second.write_text(json.dumps({**export, "items": export["items"][half:]}, indent=2))
    manifests = load_paths([str(first), str(second)], max_bytes=None)
    random.Random(seed).shuffle(manifests)
    for m in manifests:
        m.position = 0  # (given as plain objects would be: positions from the order)
    grouped = audit(manifests, kubernetes_version="1.34")
    alone = audit(manifests, kubernetes_version="1.34", memoize=False)
    assert grouped.to_dict() == alone.to_dict()
    assert any(f.count > 1 for f in grouped.findings)
