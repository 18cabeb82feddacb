"""Streamed audit of a ``kubectl get -o yaml`` export (issue 25 item 1): the same result as the whole read.

A YAML ``*List`` document is read a batch of items at a time (``_yaml_items``) and its objects'
byte spans locate the findings; these tests compare the findings, skipped files and errors with
the whole path (``load_paths``, every object kept, locating from the texts) on YAML exports of
the fixtures and the real-world corpus - as files, with a byte order mark and not-ASCII text,
indented items, and on stdin - and check that the export really was streamed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from shared_data import shared_path

from dra_constructs._io import ReadBudget
from dra_constructs.guardrails import locate
from dra_constructs.guardrails.stream import Collector, stream_paths

from .helpers import FIXTURES
from .test_stream import _corpus_objects, _export, _streamed, _whole


def _yaml_export(objects: list[dict[str, Any]], clones: int, *, indent: bool = False) -> str:
    """The objects as ``kubectl get -A -o yaml`` prints them (one ``kind: List`` document), with clones."""
    class _Dumper(yaml.SafeDumper):
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, indentless and not indent)

        def ignore_aliases(self, data: Any) -> bool:
            return True  # kubectl writes no anchors

    return str(yaml.dump(_export(objects, clones), Dumper=_Dumper, sort_keys=False, allow_unicode=True))


def _was_streamed(path: Path) -> bool:
    collector = Collector()
    stream_paths([str(path)], collector, budget=ReadBudget.of(None))
    return bool(collector.manifests) and all(m.span is not None for m in collector.manifests)


@pytest.mark.parametrize("indent", [False, True])
def test_yaml_export_streamed_equal_whole(tmp_path: Path, indent: bool) -> None:
    objects = _corpus_objects([str(shared_path("corpus/realworld")), str(FIXTURES / "noncompliant")])
    export = tmp_path / "export.yaml"
    export.write_text(_yaml_export(objects, clones=2, indent=indent), encoding="utf-8")
    assert _was_streamed(export)
    for scope in ("file", "set"):
        streamed = _streamed([str(export)], scope, tmp_path)
        assert streamed == _whole([str(export)], scope)
        assert streamed[0]["findings"]  # (the comparison compares something)


def test_yaml_export_with_bom_and_not_ascii_text_located_alike(tmp_path: Path) -> None:
    objects = _corpus_objects([str(FIXTURES / "noncompliant")])
    for n, obj in enumerate(objects):  # characters of 2, 3 and 4 UTF-8 bytes before findings' fields
        obj.setdefault("metadata", {}).setdefault("annotations", {})["note"] = "é☃🚀" * (n % 3 + 1)
    export = tmp_path / "export.yaml"
    export.write_bytes(b"\xef\xbb\xbf" + _yaml_export(objects, clones=2).encode("utf-8"))
    assert _was_streamed(export)
    streamed = _streamed([str(export)], "set", tmp_path)
    assert streamed == _whole([str(export)], "set")
    assert streamed[0]["findings"]


def test_yaml_export_on_stdin_streamed_equal_whole(tmp_path: Path) -> None:
    text = _yaml_export(_corpus_objects([str(FIXTURES / "noncompliant")]), clones=2)
    streamed = _streamed(["-"], "set", tmp_path, stdin=text)
    assert streamed == _whole(["-"], "set", stdin=text)
    assert any(f["file"] == "<stdin>" and f["line"] for f in streamed[0]["findings"])


@pytest.mark.parametrize("bad", [
    "type",  # a field of the wrong type: the type check's line
    "  x: 1\n  x: 2\n",  # a duplicate key: the parser's line
    "  y: &a [*a]\n",  # a recursive alias
])
def test_bad_item_of_a_yaml_export_is_reported_as_the_whole_read_reports_it(tmp_path: Path, bad: str) -> None:
    text = _yaml_export(_corpus_objects([str(FIXTURES / "noncompliant")]), clones=2)
    at = text.index("\n- ", len(text) // 2) + 1  # an item half way
    if bad == "type":
        name = text.index("\n    name: ", at) + 1
        text = text[:name] + "    name: 5\n    was" + text[name + len("    name"):]
    else:
        line_end = text.index("\n", at) + 1
        text = text[:line_end] + bad + text[line_end:]
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    whole = _whole([str(path)], "set")
    assert whole[2] and f"{path}:" in whole[2][0]
    assert ("metadata.name" if bad == "type" else "duplicate key" if "x:" in bad else "alias") in whole[2][0]
    assert _streamed([str(path)], "set", tmp_path) == whole


@pytest.mark.parametrize("kept", [1, locate._YAML_ITEMS_KEPT])
def test_many_flagged_items_located_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept: int) -> None:
    """More flagged items than locating keeps nodes for, of different layouts, several findings each
    (kept: 1 lets go of every node at once; their lines are not memoized by node id)."""
    monkeypatch.setattr(locate, "_YAML_ITEMS_KEPT", kept)
    pods = []
    for n in range(150):
        container: dict[str, Any] = {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}
        if n % 3:
            container["env"] = [{"name": f"E{k}", "value": "v"} for k in range(n % 7)]  # other lines per item
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{n}", "namespace": f"t{n % 4}"},
                     "spec": {"containers": [{"name": "side", "image": "s"}] * (n % 2) + [container]}})
    export = tmp_path / "pods.yaml"
    export.write_text(_yaml_export(pods, clones=0))
    assert _was_streamed(export)
    streamed = _streamed([str(export)], "set", tmp_path)
    assert streamed == _whole([str(export)], "set")
    flagged = {f["object"] for f in streamed[0]["findings"]}
    assert len(flagged) > locate._YAML_ITEMS_KEPT and len(streamed[0]["findings"]) > len(flagged)


def test_a_list_item_of_a_yaml_list_is_read_whole(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    inner = {"apiVersion": "v1", "kind": "PodList", "items": [pod, pod]}
    export = tmp_path / "nested.yaml"
    export.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [pod, inner]}, sort_keys=False))
    assert not _was_streamed(export)
    streamed = _streamed([str(export)], "set", tmp_path)
    assert streamed == _whole([str(export)], "set") and streamed[0]["findings"]


def test_a_flow_mapping_root_is_refused_as_the_whole_read_refuses_it(tmp_path: Path) -> None:
    """``- `` lines inside a flow mapping are block entries, malformed YAML: not read as a List's items."""
    pod = ("- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    containers:\n    - name: c\n"
           "      image: i\n      resources: {limits: {nvidia.com/gpu: 1}}\n")
    export = tmp_path / "flow.yaml"
    export.write_text("# export\n{apiVersion: v1, kind: List,\nitems:\n" + pod + "}\n")
    whole = _whole([str(export)], "set")
    assert whole[2] and "malformed YAML" in whole[2][0]
    assert _streamed([str(export)], "set", tmp_path) == whole


def test_a_tag_directive_behind_two_byte_order_marks_is_refused_as_the_whole_read_refuses_it(tmp_path: Path) -> None:
    """Two BOMs: decode_text drops one, libyaml's reader the other, and the ``%TAG`` after them redefines ``!!``."""
    export = tmp_path / "bom.yaml"
    export.write_bytes(b"\xef\xbb\xbf\xef\xbb\xbf%TAG !! tag:example.com,2000:\n---\napiVersion: v1\nkind: List\n"
                       b"items:\n- {apiVersion: v1, kind: Pod, metadata: {name: !!str a}}\n")
    whole = _whole([str(export)], "set")
    assert whole[2] and "tag:example.com,2000:str" in whole[2][0]
    assert _streamed([str(export)], "set", tmp_path) == whole
