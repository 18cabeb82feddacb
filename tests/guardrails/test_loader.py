"""Reading manifests: multi-document YAML, JSON, kind: List, directories, stdin, and clean errors."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails import load_paths, load_text

MULTI = """\
# leading comment
apiVersion: v1
kind: ConfigMap
metadata: {name: a}
---
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Service
    metadata: {name: b}

  - apiVersion: v1
    kind: Secret
    metadata: {name: c}
---
apiVersion: v1
kind: PodList
items:
"""


def test_multi_document_yaml_with_lists_and_lines() -> None:
    manifests = load_text(MULTI, "m.yaml")
    assert [(m.kind, m.name, m.line) for m in manifests] == [
        ("ConfigMap", "a", 2), ("Service", "b", 10), ("Secret", "c", 14)]
    assert all(m.file == "m.yaml" for m in manifests)


def test_json_list_and_stdin() -> None:
    text = ('{"apiVersion": "v1", "kind": "List", '
            '"items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}]}')
    assert [m.name for m in load_text(text, "x.json", is_json=True)] == ["p"]
    manifests = load_paths(["-"], stdin=io.StringIO(text.replace(", ", ",\t")))  # tabs: JSON, not YAML
    assert [(m.file, m.name) for m in manifests] == [("<stdin>", "p")]


def test_directory_walk_is_recursive_sorted_and_filtered(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / ".git").mkdir()
    (tmp_path / "b" / "z.yml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: z}\n")
    (tmp_path / "a.json").write_text('{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}')
    (tmp_path / "README.md").write_text("# not a manifest: ---\n")
    (tmp_path / ".git" / "x.yaml").write_text("not: [valid")
    (tmp_path / "c.YAML").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
    names = [m.name for m in load_paths([str(tmp_path)])]
    assert names == ["a", "c", "z"]
    assert [m.position for m in load_paths([str(tmp_path)])] == [0, 1, 2]


@pytest.mark.parametrize(("text", "line", "words"), [
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: [x}\n", 3, "malformed YAML"),
    ("apiVersion: v1\nkind: Pod\n  bad: indent\n", 3, "malformed YAML"),
    ("- a\n- b\n", 1, "not a list"),
    ("just a string\n", 1, "not a str"),
    ("apiVersion: v1\nmetadata: {name: x}\n", 1, "apiVersion and kind"),
    ("apiVersion: v1\nkind: Pod\n---\nkind: List\napiVersion: v1\nitems: 3\n", 4, "items must be a list"),
    ("apiVersion: v1\nkind: List\nitems:\n- 1\n", 4, "not a int"),
])
def test_malformed_input_names_file_and_line(text: str, line: int, words: str) -> None:
    with pytest.raises(DraConstructsError) as raised:
        load_text(text, "bad.yaml")
    assert raised.value.path == f"bad.yaml:{line}"
    assert words in str(raised.value)


def test_malformed_json_names_line() -> None:
    with pytest.raises(DraConstructsError) as raised:
        load_text('{\n  "apiVersion": "v1",\n  "kind": Pod\n}', "bad.json", is_json=True)
    assert raised.value.path == "bad.json:3"
    assert "malformed JSON" in raised.value.problem


def test_unreadable_paths(tmp_path: Path) -> None:
    with pytest.raises(DraConstructsError, match="no such file"):
        load_paths([str(tmp_path / "missing.yaml")])
    binary = tmp_path / "blob.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x81binary")
    with pytest.raises(DraConstructsError, match="not UTF-8"):
        load_paths([str(binary)])


def test_empty_documents_and_files_are_fine(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# only a comment\n---\n")
    assert load_paths([str(empty)]) == []
