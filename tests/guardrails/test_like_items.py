"""Export items read like a parsed one from their text (``guardrails/like_items.py``, issue 25).

The streamed audit must give what parsing every item gives: these tests compare it with the
whole path (``load_paths``) on exports whose clones differ in the strings the shape key leaves
out, and on clones that must not be read as like (a backslash, a control character, text that
is not UTF-8, a long string, another field), and check that the like path was taken at all.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from dra_constructs._io import ReadBudget
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import like_items, load_paths
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.stream import Collector, stream_paths

from .helpers import FIXTURES, write_export
from .test_stream import _corpus_objects, _export, _streamed, _whole

_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "train-0", "namespace": "t", "uid": "u-0", "resourceVersion": "1",
                 "labels": {"app": "train", "pod-template-hash": "abc"},
                 "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "train", "uid": "r"}]},
    "spec": {"nodeName": "n-0", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
             "containers": [{"name": "c", "image": "i", "resources": {"claims": [{"name": "gpu"}],
                                                                      "limits": {"nvidia.com/gpu": 1}}}]},
    "status": {"phase": "Running", "podIP": "10.0.0.1"},
}


def _pod(n: int, **metadata: Any) -> dict[str, Any]:
    pod = copy.deepcopy(_POD)
    pod["metadata"].update(name=f"train-{n}", uid=f"u-{n}", resourceVersion=str(n))
    pod["metadata"]["labels"]["pod-template-hash"] = f"h{n % 3}"
    pod["metadata"]["ownerReferences"][0]["uid"] = f"r{n}"
    pod["metadata"].update(metadata)
    pod["spec"]["nodeName"] = f"n-{n}"
    pod["status"]["podIP"] = f"10.0.0.{n}"
    return pod



@pytest.fixture()
def likes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the objects read as like a template."""
    seen: list[str] = []
    add_like = Collector.add_like

    def counted(self: Collector, metadata: dict[str, Any], *args: Any) -> None:
        seen.append(metadata["name"])
        add_like(self, metadata, *args)

    monkeypatch.setattr(Collector, "add_like", counted)
    return seen


def test_clones_are_read_like_the_first_and_audit_the_same(tmp_path: Path, likes: list[str]) -> None:
    path = write_export(tmp_path, [_pod(n) for n in range(6)])
    streamed = _streamed([str(path)], "set", tmp_path)
    assert streamed == _whole([str(path)], "set")
    assert likes == [f"train-{n}" for n in range(1, 6)]  # all but the first, from their text
    assert {f["object"] for f in streamed[0]["findings"]} >= {f"Pod/t/train-{n}" for n in range(6)}


@pytest.mark.parametrize("scope", ["file", "set"])
def test_fixture_export_takes_the_like_path_and_audits_the_same(tmp_path: Path, likes: list[str],
                                                                scope: str) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps(_export(_corpus_objects([str(FIXTURES)]), clones=3), indent=4))
    assert _streamed([str(path)], scope, tmp_path) == _whole([str(path)], scope)
    assert likes  # clones 1 and 2 of each workload are like clone 0


@pytest.mark.parametrize("name", ["train-\u00e9t\u00e9-\U0001f600", "a\\b", "tab\tname", "line\nbreak",
                                  "q\"uote", "x" * (like_items.MAX_VARIABLE + 10)])
def test_unusual_names_audit_the_same(tmp_path: Path, likes: list[str], name: str) -> None:
    """Non-ASCII text is read from the text; escapes and long strings are parsed (not like)."""
    path = write_export(tmp_path, [_pod(0), _pod(1), _pod(2, name=name), _pod(3)])
    assert _streamed([str(path)], "set", tmp_path) == _whole([str(path)], "set")
    assert ("train-1" in likes and "train-3" in likes)
    assert (name in likes) == name.startswith("train-\u00e9")


def test_invalid_utf8_in_a_like_item_is_reported_as_the_whole_read_reports_it(tmp_path: Path,
                                                                              likes: list[str]) -> None:
    path = write_export(tmp_path, [_pod(0), _pod(1), _pod(2, name="BAD"), _pod(3)])
    path.write_bytes(path.read_bytes().replace(b'"BAD"', b'"B\xff\xfeD"'))
    with pytest.raises(DraConstructsError) as whole:
        _whole([str(path)], "set")
    with pytest.raises(DraConstructsError) as streamed:
        _streamed([str(path)], "set", tmp_path)
    assert str(streamed.value) == str(whole.value) and "not UTF-8" in str(whole.value)
    assert "B" not in likes


def test_other_fields_are_other_shapes(tmp_path: Path, likes: list[str]) -> None:
    """A clone differing outside the left-out strings (image, namespace, a number, status layout) is parsed."""
    other = [_pod(2), _pod(3), _pod(4), _pod(5)]
    other[0]["spec"]["containers"][0]["image"] = "j"
    other[1]["metadata"]["namespace"] = "u"
    other[2]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 2
    other[3]["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    path = write_export(tmp_path, [_pod(0), _pod(1), *other, _pod(6)])
    assert _streamed([str(path)], "set", tmp_path) == _whole([str(path)], "set")
    assert likes == ["train-1", "train-6"]


def test_non_workload_kinds_are_parsed(tmp_path: Path, likes: list[str]) -> None:
    maps = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"m{n}", "namespace": "t"},
             "data": {"a": "b"}} for n in range(4)]
    path = write_export(tmp_path, [*maps, _pod(0), _pod(1)])
    assert _streamed([str(path)], "set", tmp_path) == _whole([str(path)], "set")
    assert likes == ["train-1"]


def test_variable_paths_are_those_the_shape_key_leaves_out() -> None:
    assert like_items.variable(("metadata", "name"), "Deployment")
    assert like_items.variable(("metadata", "labels", "pod-template-hash"), "Pod")
    assert like_items.variable(("metadata", "ownerReferences", 0, "uid"), "Pod")
    assert like_items.variable(("status", "conditions", 0, "type"), "Job")
    assert like_items.variable(("spec", "nodeName"), "Pod")
    assert not like_items.variable(("spec", "nodeName"), "Deployment")  # a template's node is read
    assert not like_items.variable(("metadata", "namespace"), "Pod")
    assert not like_items.variable(("metadata", "labels", "app"), "Pod")
    assert not like_items.variable(("metadata", "annotations", "pod-template-hash"), "Pod")
    assert not like_items.variable(("spec", "template", "spec", "nodeName"), "Deployment")


def test_like_items_keep_their_own_metadata(tmp_path: Path, likes: list[str]) -> None:
    """Names, uids, identity labels and owner references are the item's own (managedFields left out)."""
    items = [_pod(n) for n in range(5)]
    items[3]["metadata"]["managedFields"] = [{"manager": "kubelet", "time": "t3"}]
    items[4]["metadata"]["managedFields"] = [{"manager": "kubelet", "time": "t4"}]
    path = write_export(tmp_path, items)
    collector = Collector()
    stream_paths([str(path)], collector, budget=ReadBudget.of(None))
    expected = [{k: v for k, v in m.obj["metadata"].items() if k != "managedFields"}
                for m in load_paths([str(path)], max_bytes=None)]
    assert [m.obj["metadata"] for m in collector.manifests] == expected
    assert likes == ["train-1", "train-2", "train-4"]
    assert expected[2]["labels"]["pod-template-hash"] == "h2" and expected[4]["ownerReferences"][0]["uid"] == "r4"


def test_slim_copies_are_the_manifests_init_would_make(tmp_path: Path, likes: list[str]) -> None:
    """Slim copies (from a like item, and a parsed one: the escaped name) are made without
    ``Manifest.__init__``: every field is there, a field with a factory is each copy's own, and what
    the rules read is what a ``Manifest`` of the same object gives."""
    path = write_export(tmp_path, [_pod(0), _pod(1), _pod(2, name="a\\b"), _pod(3)])
    collector = Collector()
    stream_paths([str(path)], collector, budget=ReadBudget.of(None))
    first, *slims = collector.manifests
    assert likes == ["train-1", "train-3"] and len(slims) == 3
    fields = {f.name: f for f in dataclasses.fields(Manifest)}
    for slim in slims:
        assert type(slim) is Manifest and fields.keys() <= slim.__dict__.keys()
        assert slim.shape is first.shape
        made = Manifest(slim.obj, file=slim.file, line=slim.line, position=slim.position, span=slim.span,
                        shape=slim.shape)
        assert {name: getattr(slim, name) for name in fields} == {name: getattr(made, name) for name in fields}
        for name in ("api_version", "kind", "group", "version", "metadata", "name", "namespace", "display_namespace"):
            assert getattr(slim, name) == getattr(made, name), name
        assert [(p.spec, p.path, p.metadata, p.metadata_path, list(p.containers()), list(p.claims()))
                for p in slim.pods] == [(p.spec, p.path, p.metadata, p.metadata_path, list(p.containers()),
                                         list(p.claims())) for p in made.pods]
        assert slim.pods[0].metadata is slim.metadata  # a Pod's pod metadata is its own
    factories = [name for name, f in fields.items() if f.default_factory is not dataclasses.MISSING]
    assert factories and all(getattr(slims[0], name) is not getattr(slims[1], name) for name in factories)
