"""Review attacks on per-shape memoization (issue 25): objects of one shape that differ where a rule might look.

Each test audits a set with and without memoization and asserts the same JSON, the same field lines,
and that the findings name each object (its own name, namespace, line).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails.locate import with_field_lines
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.shape_key import shape_key


def _pod(name: str, namespace: str, **extra_meta: Any) -> dict[str, Any]:
    """A GPU pod with a legacy resource, a device env var, a claim request its template may lack, no grace."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "train"}, **extra_meta},
        "spec": {
            "containers": [{
                "name": "c", "image": "img",
                "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}],
                "resources": {"limits": {"nvidia.com/gpu": 1}, "claims": [{"name": "gpu", "request": "r2"}]},
            }],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
        },
    }


def _identity_variants(namespace: str) -> list[dict[str, Any]]:
    """Pods of one controller as a cluster export has them: every left-out field varies."""
    bare = _pod("bare", namespace)
    owned = _pod("owned-x1", namespace, ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "owned", "uid": "u", "controller": True}])
    owned["metadata"]["labels"]["pod-template-hash"] = "5d8f"
    generated = _pod("", namespace, generateName="gen-", uid="u2", resourceVersion="7",
                     deletionTimestamp="2026-01-01T00:00:00Z", creationTimestamp="2026-01-01T00:00:00Z")
    del generated["metadata"]["name"]
    done = _pod("done", namespace)
    done["status"] = {"phase": "Succeeded"}
    done["spec"]["nodeName"] = "gpu-node-7"
    done["spec"]["hostname"] = "h"
    token = _pod("token", namespace)
    token["spec"]["volumes"] = [{"name": "kube-api-access-q7x2p", "projected": {"sources": []}}]
    token["spec"]["containers"][0]["volumeMounts"] = [{"name": "kube-api-access-q7x2p", "mountPath": "/var/run/x"}]
    return [bare, owned, generated, done, token]


def _world() -> list[dict[str, Any]]:
    """Two tenant namespaces whose context differs: template, Namespace labels, LocalQueue."""
    template: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "gpu", "namespace": "team-a"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "r1", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}
    other_template = copy.deepcopy(template)  # team-c's template lives in team-a only: DRA005 names it
    other_template["metadata"]["name"] = "elsewhere"
    namespace_a = {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "team-a", "labels": {"isolation.dra-constructs.io/mig": "exclusive-gpu"}}}
    queue_b = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
               "metadata": {"name": "q", "namespace": "team-b"}, "spec": {"clusterQueue": "cq"}}
    moved = _pod("moved", "team-c")
    moved["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "elsewhere"
    suppressed = _pod("quiet", "team-a", annotations={
        "guardrails.dra-constructs.io/suppressions": '[{"rule": "DRA002", "reason": "reviewed"}]'})
    return [template, other_template, namespace_a, queue_b, *_identity_variants("team-a"), suppressed,
            *_identity_variants("team-b"), moved, *_identity_variants("")]


def _both(paths: list[str], **options: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    results = []
    for memoize in (True, False):
        texts: dict[str, str] = {}
        result = audit(load_paths(paths, texts=texts), memoize=memoize, **options)
        results.append((result.to_dict(), with_field_lines(result, texts).to_dict()))
    (memo, memo_lines), (plain, plain_lines) = results
    assert memo == plain
    assert memo_lines == plain_lines
    return memo, memo_lines


def _write(path: Path, objects: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return str(path)


@pytest.mark.parametrize("scope", ["set", "file"])
def test_namespaces_files_and_identity_fields(tmp_path: Path, scope: str) -> None:
    world = _world()
    first = _write(tmp_path / "a.yaml", world)
    second = _write(tmp_path / "b.yaml", [o for o in world if o["kind"] == "Pod"])  # same shapes, another file
    result, located = _both([first, second], tenant_scope=scope)
    by_object: dict[str, set[str]] = {}
    messages: dict[str, set[str]] = {}
    for finding in result["findings"]:
        by_object.setdefault(f"{finding['file']}:{finding['object']}", set()).add(finding["rule"])
        messages.setdefault(f"{finding['file']}:{finding['object']}", set()).add(finding["message"])
    # the context of each namespace decides, not the first object of the shape
    team_a = " ".join(messages[f"{first}:Pod/team-a/bare"])
    team_b = " ".join(messages[f"{first}:Pod/team-b/bare"])
    assert "request 'r2' of claim 'gpu'" in team_a and "not in the pod's namespace" not in team_a
    assert "request 'r2' of claim 'gpu'" not in team_b and "not in the pod's namespace 'team-b'" in team_b
    assert "DRA014" in by_object[f"{first}:Pod/team-b/bare"]  # team-b has a LocalQueue, the pod names none
    assert "DRA014" not in by_object[f"{first}:Pod/team-a/bare"]
    assert {f"{first}:Pod/team-a/gen-*", f"{first}:Pod/default/gen-*"} <= set(by_object)
    # suppressions are the object's own
    suppressed = {(s["object"], s["rule"]) for s in result["suppressed"]}
    assert ("Pod/team-a/quiet", "DRA002") in suppressed
    assert f"{first}:Pod/team-a/bare" in by_object and "DRA002" in by_object[f"{first}:Pod/team-a/bare"]
    # every finding's line is inside its own object and on its own field
    texts = {first: Path(first).read_text().splitlines(), second: Path(second).read_text().splitlines()}
    limits = [f for f in located["findings"] if f["rule"] == "DRA001"]
    assert len(limits) == 2 * (3 * 5 + 2)  # every pod, in both files
    for finding in limits:
        assert "nvidia.com/gpu: 1" in texts[finding["file"]][finding["line"] - 1], finding


def test_kubectl_json_export(tmp_path: Path) -> None:
    """The same set as ``kubectl get -o json`` writes it: shared layouts and shared shapes together."""
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": _world()}, indent=4))
    _, located = _both([str(path)])
    lines = path.read_text().split("\n")
    limits = [f for f in located["findings"] if f["rule"] == "DRA001"]
    assert len(limits) == 3 * 5 + 2
    for finding in limits:
        assert '"nvidia.com/gpu": 1' in lines[finding["line"] - 1], finding


def test_shape_includes_namespace_and_file_but_not_identity() -> None:
    variants = _identity_variants("team-a")
    keys = {shape_key(Manifest(o, file="f")) for o in variants}
    assert len(keys) == 1
    assert shape_key(Manifest(variants[0], file="f")) != shape_key(Manifest(_identity_variants("team-b")[0], file="f"))
    assert shape_key(Manifest(variants[0], file="f")) != shape_key(Manifest(variants[0], file="g"))


def test_order_and_duplicates(tmp_path: Path) -> None:
    """The first object of a shape is not special: the same set reversed, and an object listed twice."""
    world = _world()
    world.append(copy.deepcopy(world[4]))  # the same pod twice in one file: two places, two findings
    forward = _write(tmp_path / "f.yaml", world)
    backward = _write(tmp_path / "r.yaml", world[::-1])
    forward_result, _ = _both([forward])
    backward_result, _ = _both([backward])

    def rules(result: dict[str, Any]) -> list[tuple[str, str, str, str]]:
        return sorted((f["object"], f["rule"], f["path"], f["message"]) for f in result["findings"])

    assert rules(forward_result) == rules(backward_result)


def test_a_yaml_timestamp_is_not_the_string_of_its_text(tmp_path: Path) -> None:
    """YAML reads ``2026-01-01`` as a date, which orjson writes as the string ``"2026-01-01"``: two pods
    alike but for the quotes shared a key, though the env rule looks up only the string name."""
    path = tmp_path / "set.yaml"
    path.write_text("""\
apiVersion: v1
kind: ConfigMap
metadata: {name: "2026-01-01", namespace: t}
data: {CUDA_VISIBLE_DEVICES: "0"}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: t}
spec:
  containers:
  - {name: c, image: i, envFrom: [{configMapRef: {name: 2026-01-01}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: t}
spec:
  containers:
  - {name: c, image: i, envFrom: [{configMapRef: {name: "2026-01-01"}}]}
""")
    result, _ = _both([str(path)])
    assert [(f["rule"], f["name"]) for f in result["findings"]] == [("DRA002", "b")]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_nan_and_infinity_are_not_null(value: float) -> None:
    """orjson writes NaN and infinity as ``null``; the env rule reads ``None`` as "hides devices" and a float
    as a device list (objects from the Python API: the loader refuses a float env value)."""
    unset = _pod("a", "t")
    unset["spec"]["containers"][0]["env"] = [{"name": "CUDA_VISIBLE_DEVICES", "value": None}]
    odd = copy.deepcopy(unset)
    odd["metadata"]["name"] = "b"
    odd["spec"]["containers"][0]["env"][0]["value"] = value
    assert shape_key(Manifest(unset)) is not None
    assert shape_key(Manifest(odd)) is None
    results = [audit([copy.deepcopy(unset), copy.deepcopy(odd)], memoize=memoize).to_dict()
               for memoize in (True, False)]
    assert results[0] == results[1]
    assert [f["name"] for f in results[0]["findings"] if f["rule"] == "DRA002"] == ["b"]
