"""Locating in a kubectl JSON list reuses the node of an object with the same layout (issue 25)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dra_constructs.guardrails import audit, load_paths, locate
from dra_constructs.guardrails.locate import with_field_lines


def _pod(i: int) -> dict[str, Any]:
    container: dict[str, Any] = {"name": f"c-{i}", "image": f"img:{i}",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}
    if i % 3 == 0:  # another layout: one more line before the limits
        container["env"] = [{"name": "NOTE", "value": f"he said \\\": {i}\" : {{"}]
    metadata: dict[str, Any] = {"name": f"pod-{i}", "namespace": f"ns-{i % 2}", "uid": f"u-{i}"}
    if i % 4 == 1:  # a value that looks like a key when its quotes are not matched whole
        metadata["annotations"] = {"x": '": "', "y": "\\"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": f"node-{i}", "containers": [container]}, "status": {"phase": "Running"}}


def test_same_layout_objects_get_the_lines_a_fresh_composition_gives(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [_pod(i) for i in range(24)]},
                               indent=4))
    texts: dict[str, str] = {}
    result = audit(load_paths([str(path)], texts=texts))
    shared = with_field_lines(result, texts)
    lines = path.read_text().splitlines()
    limits = [f for f in shared.findings if f.path.endswith("limits['nvidia.com/gpu']")]
    assert len(limits) == 24
    assert all(f.line is not None and '"nvidia.com/gpu": 1' in lines[f.line - 1] for f in limits)
    file = locate._File(texts[str(path)])
    for finding in result.findings:
        assert finding.line is not None
        file.node_at(finding.line)
    assert 1 < len(file._layouts) < 24  # layouts were shared, and different layouts were not
    monkeypatch.setattr(locate, "_LAYOUTS_KEPT", 0)  # every object composed on its own
    assert with_field_lines(result, texts) == shared


@pytest.mark.parametrize("brk", ["\u2028", "\u2029", "\x85"])
def test_a_yaml_line_break_inside_a_json_string_moves_no_line(tmp_path: Path, brk: str) -> None:
    """JSON allows raw U+2028, U+2029 and NEL in strings; YAML (which composes the object) counts them as line
    breaks, the loader and the file do not. Blanked, such a string gave its layout to objects without one
    (whose lines then moved by one); composed as it was, its own fields after it were one line off."""
    def pod(i: int, note: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"p{i}", "namespace": "t", "annotations": {"note": note}},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}

    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": [pod(0, f"a{brk}b"), pod(1, "ab"), pod(2, f"{brk}{brk}")]},
                               indent=2, ensure_ascii=False), encoding="utf-8")
    texts: dict[str, str] = {}
    located = with_field_lines(audit(load_paths([str(path)], texts=texts)), texts)
    lines = path.read_text(encoding="utf-8").split("\n")  # the file's lines, as an editor shows them
    limits = [f for f in located.findings if f.rule == "DRA001"]
    assert [f.name for f in limits] == ["p0", "p1", "p2"]
    assert all(f.line is not None and '"nvidia.com/gpu": 1' in lines[f.line - 1] for f in limits), \
        [(f.name, f.line) for f in limits]


_KEYS = st.text(alphabet=" :ab\"\\,{}[]\u00e9\u2028", max_size=4)
_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | _KEYS,
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
                       max_leaves=8)


@given(st.dictionaries(_KEYS, _VALUES, max_size=4), st.dictionaries(_KEYS, _VALUES, max_size=4),
       st.sampled_from([None, 2, 4]))
@settings(max_examples=300, deadline=None)
def test_layouts_are_equal_exactly_when_the_blanked_texts_are(a: dict[str, Any], b: dict[str, Any],
                                                              indent: int | None) -> None:
    """The layout made without a call per string (text between the strings, keys) tells two objects apart
    exactly as their texts with the string values blanked do: equal layouts share a node, so a layout that
    forgot a key or a string's place would give one object another's lines."""
    def blanked(text: str) -> str:
        return locate._JSON_STRING.sub(locate._blank_value, text)

    keys_at: dict[tuple[str, ...], tuple[int, ...]] = {}
    texts = [json.dumps(value, indent=indent, ensure_ascii=False) for value in (a, b)]
    assert (locate._layout(texts[0], keys_at) == locate._layout(texts[1], keys_at)) == \
        (blanked(texts[0]) == blanked(texts[1]))


def test_same_structure_other_keys_share_no_node(tmp_path: Path) -> None:
    """Two objects whose texts differ only in keys (same quotes, colons and line breaks) get their own lines:
    the GPU container is the first list's in one and the second's in the other."""
    def container(resource: str) -> dict[str, Any]:
        return {"name": "c", "image": "i", "resources": {"limits": {resource: 1}}}

    def pod(i: int, first: str, second: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "t"},
                "spec": {first: [container("example.com/fpga")], second: [container("nvidia.com/gpu")]}}

    path = tmp_path / "export.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": [pod(0, "initContainers", "containers"),
                                          pod(1, "containers", "initContainers")]}, indent=4))
    texts: dict[str, str] = {}
    located = with_field_lines(audit(load_paths([str(path)], texts=texts)), texts)
    lines = path.read_text().split("\n")
    limits = [f for f in located.findings if f.rule == "DRA001"]
    assert [f.name for f in limits] == ["p0", "p1"]
    assert all(f.line is not None and '"nvidia.com/gpu": 1' in lines[f.line - 1] for f in limits), \
        [(f.path, f.line) for f in limits]
