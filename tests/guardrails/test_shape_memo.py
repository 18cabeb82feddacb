"""Per-shape memoization of the per-object rules (issue 25): same findings as checking every object.

The engine checks workloads that differ only in identity fields once (``shape_key``). Two kinds of
proof: (1) mutating any field the key leaves out changes no finding of the object except its
identity (name, object id) - the rules do not read those fields; (2) audits of varied sets
(fixtures, clones that differ in identity fields, clones mutated anywhere) give the same JSON
with and without memoization.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_constructs.guardrails import audit, load_paths
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.shape_key import (
    IDENTITY_LABELS,
    IDENTITY_METADATA,
    MEMOIZED_KINDS,
    POD_IDENTITY_SPEC,
    shape_key,
)

from .helpers import FIXTURES, field_paths

# YAML gives dates and NaN too (orjson writes them as a string and as null: keys must not merge them)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=6),
                     st.sampled_from(["All", "ExactCount", "gpu", "nvidia.com/gpu", "CUDA_VISIBLE_DEVICES"]),
                     st.dates(), st.sampled_from([float("nan"), float("inf"), 0.5]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                       max_leaves=8)
_ALL = load_paths([str(FIXTURES / "noncompliant"), str(FIXTURES / "compliant")])
_SEEDS = [m.obj for m in _ALL]
_WORKLOADS = [i for i, m in enumerate(_ALL) if m.kind in MEMOIZED_KINDS and isinstance(m.obj.get("metadata"), dict)]
_IDENTITY = ("object", "name", "sample")


def _excluded_places(obj: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every field the shape key leaves out, as a path to set."""
    places: list[tuple[str, ...]] = [("status",)]
    places += [("metadata", key) for key in sorted(IDENTITY_METADATA)]
    places += [("metadata", "labels", key) for key in sorted(IDENTITY_LABELS)]
    if obj.get("kind") == "Pod":
        places += [("spec", key) for key in sorted(POD_IDENTITY_SPEC)]
    return places


def _set(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = obj
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[path[-1]] = value


def _add_token_volume(obj: dict[str, Any], suffix: str) -> None:
    """What the API server adds to a pod: a projected token volume with a random name, mounted everywhere."""
    spec = obj.get("spec")
    if obj.get("kind") != "Pod" or not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
        return
    name = f"kube-api-access-{suffix}"
    volumes: list[Any] = spec["volumes"] if isinstance(spec.get("volumes"), list) else []
    spec["volumes"] = [*volumes, {"name": name, "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]
    for container in spec["containers"]:
        if isinstance(container, dict):
            mounts: list[Any] = container["volumeMounts"] if isinstance(container.get("volumeMounts"), list) else []
            container["volumeMounts"] = [*mounts, {"name": name, "mountPath": "/var/run/secrets/x"}]


def _findings(objects: list[dict[str, Any]], memoize: bool) -> dict[str, Any]:
    return audit([Manifest(copy.deepcopy(o), file="set.yaml", line=i + 1) for i, o in enumerate(objects)],
                 memoize=memoize).to_dict()


def _without_identity(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in f.items() if k not in _IDENTITY} for f in result["findings"] + result["suppressed"]]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(_WORKLOADS), choice=st.integers(0, 10_000), value=_VALUES)
def test_no_rule_reads_a_field_the_key_leaves_out(seed: int, choice: int, value: Any) -> None:
    """Setting any left-out field to anything changes no finding but the object's identity."""
    obj = copy.deepcopy(_SEEDS[seed])
    places = _excluded_places(obj)
    place = places[choice % len(places)]
    if place[0] == "metadata" and place[1] in ("name", "generateName") and not isinstance(value, str):
        value = f"x{value!r}"  # a name of another type is another object kind of problem (loader)
    mutated = copy.deepcopy(obj)
    _set(mutated, place, value)
    _add_token_volume(mutated, "q7x2p")
    before = _without_identity(_findings([obj], memoize=False))
    after = _without_identity(_findings([mutated], memoize=False))
    assert after == before, place
    assert shape_key(Manifest(obj, file="set.yaml")) == shape_key(Manifest(mutated, file="set.yaml"))


def _clone(obj: dict[str, Any], n: int, draw: Any) -> dict[str, Any]:
    clone = copy.deepcopy(obj)
    for place in draw(st.lists(st.sampled_from(_excluded_places(clone)), max_size=4)):
        _set(clone, place, draw(_VALUES) if place[-1] not in ("name", "generateName") else f"clone-{n}")
    _add_token_volume(clone, f"{n:05d}")
    return clone


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_memoized_audit_equals_unmemoized(data: st.DataObject) -> None:
    """Fixtures plus identity clones plus clones mutated anywhere: the same JSON either way."""
    objects = [copy.deepcopy(o) for o in _SEEDS]
    for n in range(data.draw(st.integers(1, 12))):
        obj = copy.deepcopy(_SEEDS[data.draw(st.sampled_from(_WORKLOADS))])
        if data.draw(st.booleans()):
            paths = field_paths(obj)
            path = paths[data.draw(st.integers(0, len(paths) - 1))]
            if path and path[0] not in ("apiVersion", "kind"):
                node = obj
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = data.draw(_VALUES)
        objects.append(_clone(obj, n, data.draw))
    assert _findings(objects, memoize=True) == _findings(objects, memoize=False)



def test_identity_clones_share_one_key_and_findings_name_each_object() -> None:
    """A ReplicaSet's pods: one key, one evaluation, one finding per pod with its own name and line."""
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "a", "namespace": "t", "labels": {"app": "x", "pod-template-hash": "1"}},
           "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                                                      "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
           "status": {"phase": "Running"}}
    other = copy.deepcopy(pod)
    other["metadata"].update(name="b", uid="u2", labels={"app": "x", "pod-template-hash": "2"})
    other["spec"]["nodeName"] = "n2"
    other["status"] = {"phase": "Pending"}
    assert shape_key(Manifest(pod, file="f")) == shape_key(Manifest(other, file="f"))
    assert shape_key(Manifest(pod, file="f")) != shape_key(Manifest(other, file="g"))  # the file is read (DRA009)
    moved = copy.deepcopy(other)
    moved["metadata"]["namespace"] = "u"
    assert shape_key(Manifest(pod, file="f")) != shape_key(Manifest(moved, file="f"))
    result = audit([Manifest(pod, file="f", line=1), Manifest(other, file="f", line=20)])
    dra001 = [f for f in result.findings if f.rule == "DRA001"]
    assert [(f.name, f.line) for f in dra001] == [("a", 1), ("b", 20)]
    assert result.to_dict() == audit([Manifest(pod, file="f", line=1), Manifest(other, file="f", line=20)],
                                     memoize=False).to_dict()


@pytest.mark.parametrize("kind", ["DeviceClass", "Namespace", "ConfigMap", "ResourceClaim"])
def test_kinds_whose_rules_print_their_name_are_not_memoized(kind: str) -> None:
    assert shape_key(Manifest({"apiVersion": "v1", "kind": kind, "metadata": {"name": "a"}})) is None


def test_values_orjson_cannot_write_are_checked_alone() -> None:
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "annotations": {1: "x"}},
                           "spec": {}}
    assert shape_key(Manifest(pod)) is None
    pod["metadata"]["annotations"] = {"big": 2**70}
    assert shape_key(Manifest(pod)) is None
