"""Export items of kinds no like-item template is learnt from are parsed in batches (issue 25).

``stream._Items`` parses the ConfigMaps, Services, quotas and custom resources of a ``kubectl
-o json`` export together (``_json_stream.parse_items``: each text by orjson alone, the checks of
the proven path once for the batch) and checks their types with ``shape.metadata_only_ok``
instead of the walk. These tests fail if that drops or changes anything a rule reads (a
ConfigMap's data behind ``envFrom``, the Kueue configuration, quotas, namespaces' labels), or if
a malformed or hostile item is reported otherwise than by the whole read (``load_paths``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_constructs._json_stream import NotStreamable, parse_item, parse_items
from dra_constructs.guardrails import stream
from dra_constructs.guardrails.shape import metadata_only_ok, shape_problem

from .helpers import write_export
from .test_stream import _streamed, _whole

_KUEUE_CONFIG = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
    "name": "kueue", "namespace": "kueue-system", "labels": {"dra-constructs.io/component": "kueue-configuration"}},
    "data": {"c.yaml": "resources:\n  deviceClassMappings:\n  - name: x/y\n    deviceClassNames: [other]\n"}}
_CLAIM_TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": "gpu", "namespace": "ml"},
                   "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                       "deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}


def _small(i: int) -> dict[str, Any]:
    """A ConfigMap or a Service (the kinds batched), as in ``benchmarks/audit_bench.py``."""
    metadata: dict[str, Any] = {"name": f"app-{i}", "namespace": "ml", "uid": f"u-{i}"}
    if i % 2:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"LOG_LEVEL": "info"}}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {**metadata, "labels": {"app": f"a{i}"}},
            "spec": {"selector": {"app": f"a{i}"}, "ports": [{"port": 80}]}}


def _workload(name: str, **container: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
                         "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}]},
                                         **container}]}}}}



@pytest.fixture()
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the batches parsed together (``None`` answers count as 0)."""
    sizes: list[int] = []

    def counted(chunks: list[bytes]) -> list[Any] | None:
        values = parse_items(chunks)
        sizes.append(len(values) if values is not None else 0)
        return values

    monkeypatch.setattr(stream, "parse_items", counted)
    return sizes


@pytest.mark.parametrize("scope", ["file", "set"])
def test_fields_rules_read_of_batched_kinds_are_kept(tmp_path: Path, batches: list[int], scope: str) -> None:
    """A device variable in a ConfigMap behind ``envFrom``, the Kueue configuration, a quota and a
    tenant namespace's label, among batched items: the same findings as the whole read."""
    env = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-env", "namespace": "ml"},
           "data": {"NVIDIA_VISIBLE_DEVICES": "all"}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml"},
             "spec": {"hard": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "0"}}}
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "ml", "labels": {"resource.kubernetes.io/admin-access": "true"}}}
    items = [*map(_small, range(10)), env, _KUEUE_CONFIG, quota, namespace, _CLAIM_TEMPLATE,
             *map(_small, range(10, 20)), _workload("w", envFrom=[{"configMapRef": {"name": "gpu-env"}}]),
             *map(_small, range(20, 25))]
    path = write_export(tmp_path, items)
    streamed = _streamed([str(path)], scope, tmp_path)
    assert streamed == _whole([str(path)], scope)
    rules = {f["rule"] for f in streamed[0]["findings"]}
    assert {"DRA002", "DRA014"} <= rules  # (the comparison compares findings that read those fields)
    assert max(batches) >= 10  # the batched path was taken


_BAD_METADATA = [({"name": 5}, "metadata.name"), ({"generateName": ["x"]}, "metadata.generateName"),
                 ({"namespace": {"a": 1}}, "metadata.namespace"), ({"labels": {"a": 1}}, "metadata.labels.a"),
                 ({"labels": ["a"]}, "metadata.labels"), ({"annotations": "x"}, "metadata.annotations"),
                 ({"annotations": {"a": True}}, "metadata.annotations.a")]


@pytest.mark.parametrize(("bad", "field"), _BAD_METADATA)
@pytest.mark.parametrize("kind", ["ConfigMap", "Service", "Widget"])
def test_malformed_metadata_of_a_batched_item_is_reported_as_the_whole_read(
        tmp_path: Path, batches: list[int], bad: dict[str, Any], field: str, kind: str) -> None:
    item = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "ml", **bad}}
    path = write_export(tmp_path, [*map(_small, range(6)), item, *map(_small, range(6, 12))])
    whole = _whole([str(path)], "set")
    assert len(whole[2]) == 1 and field in whole[2][0] and f"{path}:" in whole[2][0]
    assert _streamed([str(path)], "set", tmp_path) == whole
    assert batches  # (the item was among batched ones)


def test_metadata_not_a_mapping_is_reported_as_the_whole_read(tmp_path: Path) -> None:
    path = write_export(tmp_path, [*map(_small, range(4)), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": 7},
                             *map(_small, range(4, 8))])
    whole = _whole([str(path)], "set")
    assert len(whole[2]) == 1 and "metadata" in whole[2][0]
    assert _streamed([str(path)], "set", tmp_path) == whole


_HOSTILE = {
    "duplicate key": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "name": "b"}}',
    "surrogate escape": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "\\ud800"}}',
    "long integer and a float": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, '
                                '"x": 123456789012345678901234, "y": 1.5}',
    "NaN": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "x": NaN}',
    "space before a colon": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata" : {"name": "a", "name" : "b"}}',
    "escaped quote before a colon": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a\\":"}}',
    "too deep": '{"apiVersion": "v1", "kind": "ConfigMap", "x": ' + "[" * 199 + "]" * 199 + "}",
    "two values": '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, '
                  '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}',
    "a list in the list": '{"apiVersion": "v1", "kind": "ConfigMapList", "items": []}',
}


@pytest.mark.parametrize("case", sorted(_HOSTILE))
def test_hostile_item_among_batched_ones_is_read_as_the_whole_read(tmp_path: Path, case: str) -> None:
    """Items a batch must not prove: the streamed audit reports (or reads) them as the whole read."""
    path = write_export(tmp_path, [*map(_small, range(6)), "HOSTILE", *map(_small, range(6, 12))])
    path.write_text(path.read_text().replace('"HOSTILE"', _HOSTILE[case]))
    assert _streamed([str(path)], "set", tmp_path) == _whole([str(path)], "set")


def test_items_that_parse_only_together_are_not_a_batch(tmp_path: Path) -> None:
    """Texts cut by the splitter that parse as the same number of values only when joined (one
    opens a list the next closes, a third holds two values) are parsed one by one (and the file
    read whole); the batch would have given the values other items' lines."""
    head = '{\n        "apiVersion": "v1", "kind": "ConfigMap"'
    texts = [head + ', "k": [{\n    }',
             '{"apiVersion": "v1", "kind": "ConfigMap", "z": 1}]\n    }',
             '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, '
             '{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}\n    }']
    assert json.loads("[" + ",".join(texts) + "]").__len__() == 3
    assert parse_items([text.encode() for text in texts]) is None
    path = tmp_path / "export.json"
    path.write_text('{\n    "apiVersion": "v1",\n    "kind": "List",\n    "items": [\n    '
                    + ",\n    ".join(texts) + '\n    ]\n}\n')
    assert _streamed([str(path)], "set", tmp_path) == _whole([str(path)], "set")


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                     st.text(max_size=8))
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["apiVersion", "kind", "metadata", "data", "x", "x\\\"", "y"]),
                                _JSON, min_size=1, max_size=5), min_size=1, max_size=6),
       st.booleans())
def test_parse_items_gives_what_parse_item_gives(objects: list[dict[str, Any]], spaced: bool) -> None:
    """Each value of a batch is the one its text parses to alone, or there is no batch."""
    texts = [json.dumps(obj, indent=4, separators=(", ", " : ") if spaced else None).encode() for obj in objects]
    values = parse_items(texts)
    alone = []
    for text in texts:
        try:
            alone.append(parse_item(text, "x.json", 1))
        except NotStreamable:  # no batch may hold it
            assert values is None
            return
    if values is not None:
        assert json.dumps(values, sort_keys=True) == json.dumps(alone, sort_keys=True)
        assert [type(v) for v in values] == [type(v) for v in alone]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["ConfigMap", "Service", "Widget", "Pod", "ResourceClaim", "DeviceClass"]),
       st.dictionaries(st.sampled_from(["name", "generateName", "namespace", "labels", "annotations", "uid"]),
                       st.one_of(_JSON, st.dictionaries(st.text(max_size=4), _SCALARS, max_size=3)), max_size=5))
def test_metadata_only_ok_never_passes_what_the_walk_refuses(kind: str, metadata: dict[str, Any]) -> None:
    obj = {"apiVersion": "resource.k8s.io/v1" if kind.startswith(("Resource", "Device")) else "v1",
           "kind": kind, "metadata": metadata}
    if metadata_only_ok(obj):
        assert shape_problem(obj) is None
    elif kind in ("ConfigMap", "Service", "Widget"):
        assert shape_problem(obj) is not None  # (and the fast check answers for well-typed objects)
