"""Objects of kinds without known pod-spec paths skip the walk for pod specs only when it finds nothing (issue 25).

``manifest.nothing_to_discover`` lets a ConfigMap, a Service or a custom resource without any key
the walk (``_discover``) finds by skip it. These tests fail if the skip drops a finding: pod specs,
loose containers and resource dicts in unknown fields of such objects, at any depth, are still
found, and the pre-check never says "nothing" where the walk finds something.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_constructs.cli import main as cli_main
from dra_constructs.guardrails import manifest
from dra_constructs.guardrails.engine import audit
from dra_constructs.guardrails.manifest import Manifest, _discover, nothing_to_discover

_POD = {"containers": [{"name": "w", "image": "train:1", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}


def _odd_objects() -> list[dict[str, Any]]:
    """Pod-spec-like, container-like and resources dicts in fields no kind defines."""
    meta = {"namespace": "ml"}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", **meta}, "template": {"spec": _POD}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", **meta},
         "spec": {"ports": [{"port": 80}], "extra": [{"deep": _POD}]}},
        {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "tr", **meta},
         "spec": {"worker": {"image": "y", "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]}}},
        {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "th", **meta},
         "spec": {"r": {"requests": {"nvidia.com/gpu": 2}}}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "env-only", **meta},
         "spec": {"c": {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}}},
    ]


def _walked(monkeypatch: pytest.MonkeyPatch, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    monkeypatch.setattr(manifest, "nothing_to_discover", lambda root: False)
    try:
        return [dataclasses.asdict(f) for f in audit(objects).findings]
    finally:
        monkeypatch.undo()


def test_pod_specs_in_unknown_fields_are_still_found(monkeypatch: pytest.MonkeyPatch) -> None:
    objects = _odd_objects()
    findings = audit(objects).findings
    found = {f.name for f in findings}
    assert found == {"cm", "svc", "tr", "th", "env-only"}  # each odd object has a finding
    assert [dataclasses.asdict(f) for f in findings] == _walked(monkeypatch, objects)
    assert not any(nothing_to_discover(o) for o in objects)


def test_odd_objects_in_an_export_are_found_as_by_the_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    plain = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": "ml"},
              "data": {"k": "v"}} for i in range(20)]
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": plain + _odd_objects()}, indent=4))

    def report() -> str:
        out = tmp_path / "out.json"
        cli_main(["audit", "--quiet", "--format", "json", "-o", str(out), str(path)])
        return out.read_text()

    skipped = report()
    monkeypatch.setattr(manifest, "nothing_to_discover", lambda root: False)
    assert skipped == report()
    assert all(name in skipped for name in ("ConfigMap/ml/cm", "Service/ml/svc", "Trainer/ml/tr", "Thing/ml/th"))
    capsys.readouterr()


def test_plain_config_maps_and_services_skip_the_walk() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"image": "x"}},
                  "data": {"LOG_LEVEL": "info", "note": 'says "image": here'}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
               "spec": {"selector": {"app": "a"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    assert nothing_to_discover(service)
    # a quoted key inside a string is written escaped: no false "found"; metadata is not searched
    assert nothing_to_discover(config_map)
    assert Manifest(config_map).pods == [] and Manifest(service).loose_resources() == []


@pytest.mark.parametrize("value", [
    {1: {"containers": [{}]}},           # a key that is not a string
    {"n": 2**70, "c": {"image": "x"}},   # an integer orjson cannot write
    {"t": (1, 2)},                       # a tuple: written as a list, nothing found
])
def test_values_orjson_cannot_write_are_walked(value: dict[Any, Any]) -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "spec": value}
    if not nothing_to_discover(obj):
        return  # walked: whatever it finds is found
    assert _discover(obj) == manifest._Discovered()


_KEYS = st.sampled_from(["containers", "image", "env", "limits", "requests", "resources", "spec", "template",
                         "name", 'x"image":', "image\\", "metadata", "status", "kind"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from(["a", "image", '"env":', "x\\"]))
_VALUES = st.recursive(_LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_nothing_to_discover_never_hides_what_the_walk_finds(root: dict[str, Any]) -> None:
    found = _discover(root)
    if nothing_to_discover(root):
        assert not found.pods and not found.loose and not found.resources
