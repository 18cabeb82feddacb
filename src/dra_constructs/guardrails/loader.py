"""Read manifests from files, directories and stdin (pure Python).

YAML (multi-document) and JSON; ``kind: List`` (and ``*List``) objects are flattened into their
items. Each object keeps its file and the line its document (or list item) starts on.
Unreadable or malformed input raises :class:`~dra_constructs.errors.DraConstructsError` with
``file:line``, never a parser traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import yaml

from ..errors import DraConstructsError
from .manifest import Manifest
from .skipped import SkippedInput, load_or_skip

__all__ = ["MANIFEST_SUFFIXES", "STDIN", "STDIN_NAME", "load_paths", "load_text"]

#: File suffixes a directory walk picks up.
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: The path argument meaning standard input, and the name findings give it.
STDIN = "-"
STDIN_NAME = "<stdin>"

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available


def _bad(file: str, line: int | None, problem: str, fix: str, value: Any = None) -> DraConstructsError:
    where = f"{file}:{line}" if line else file
    return DraConstructsError(where, "document", value, problem, fix)


def _line_text(text: str, line: int | None) -> str | None:
    """The offending source line (shortened), shown as the error's value."""
    if not line:
        return None
    lines = text.splitlines()
    snippet = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return snippet[:80] or None


def _item_lines(node: yaml.Node) -> list[int]:
    """1-based start lines of the ``items`` of a ``kind: List`` document node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return []


_Located = Iterator[tuple[dict[str, Any], int | None]]


def _objects(doc: Any, file: str, line: int | None, item_lines: list[int]) -> _Located:
    if doc is None:
        return  # empty document (a trailing ---, a comment-only chunk)
    if not isinstance(doc, dict):
        raise _bad(file, line, f"a document must be a Kubernetes object (a mapping), not a {type(doc).__name__}",
                   "give each document apiVersion, kind and metadata; wrap several objects in kind: List "
                   "or separate them with ---", value=type(doc).__name__)
    kind = doc.get("kind")
    api_version = doc.get("apiVersion")
    if not isinstance(kind, str) or not kind or not isinstance(api_version, str) or not api_version:
        raise _bad(file, line, "not a Kubernetes object: apiVersion and kind must be non-empty strings",
                   "add apiVersion and kind (render Helm charts first: helm template ... | dra-constructs audit -)",
                   value={"apiVersion": api_version, "kind": kind})
    if kind.endswith("List") and "items" in doc:
        items = doc.get("items")
        if items is None:
            return
        if not isinstance(items, list):
            raise _bad(file, line, f"{kind}.items must be a list", "write items: [ ... ]")
        for i, item in enumerate(items):
            item_line = item_lines[i] if i < len(item_lines) else line
            yield from _objects(item, file, item_line, [])
        return
    yield doc, line


def _load_yaml(text: str, file: str) -> _Located:
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1 if node is not None else None
            doc = loader.construct_document(node) if node is not None else None
            yield from _objects(doc, file, line, _item_lines(node) if node is not None else [])
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = " ".join(p for p in (error.context, error.problem) if p) or "invalid YAML"
        opened = error.context_mark
        if opened is not None and mark is not None and opened.line != mark.line:
            problem += f" (opened on line {opened.line + 1})"
        raise _bad(file, line, f"malformed YAML: {problem}", "fix the YAML syntax at that line",
                   _line_text(text, line)) from None
    except yaml.YAMLError as error:
        raise _bad(file, None, f"malformed YAML: {error}", "fix the YAML syntax") from None
    finally:
        loader.dispose()


def _load_json(text: str, file: str) -> _Located:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as error:
        raise _bad(file, error.lineno, f"malformed JSON: {error.msg} (column {error.colno})",
                   "fix the JSON syntax at that line", _line_text(text, error.lineno)) from None
    item_lines: list[int] = []
    if isinstance(doc, dict) and isinstance(doc.get("items"), list):
        try:  # JSON is YAML: libyaml's composer gives the line of every list item
            node = yaml.compose(text, Loader=_Loader)
            item_lines = _item_lines(node) if node is not None else []
        except yaml.YAMLError:
            item_lines = []
    yield from _objects(doc, file, 1, item_lines)


def load_text(text: str, file: str, *, is_json: bool = False) -> list[Manifest]:
    """Parse one file's (or stdin's) text: JSON files with ``json``, anything else as YAML.

    YAML text that fails to parse but is valid JSON (JSON with tabs, say) is read as JSON.
    """
    if is_json:
        return [Manifest(obj, file=file, line=line) for obj, line in _load_json(text, file)]
    try:
        return [Manifest(obj, file=file, line=line) for obj, line in _load_yaml(text, file)]
    except DraConstructsError:
        if text.lstrip().startswith(("{", "[")):
            try:
                json.loads(text)
            except ValueError:
                pass
            else:
                return [Manifest(obj, file=file, line=line) for obj, line in _load_json(text, file)]
        raise


def _read(path: Path, display: str) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as error:
        raise _bad(display, None, f"not UTF-8 text ({error.reason} at byte {error.start})",
                   "pass Kubernetes manifests as UTF-8 YAML or JSON files") from None
    except OSError as error:
        raise _bad(display, None, f"cannot read: {error.strerror or error}",
                   "check the path and its permissions") from None


def _walk(root: Path) -> Iterator[Path]:
    """Manifest files under ``root`` in a stable order, skipping hidden directories."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.lower().endswith(MANIFEST_SUFFIXES):
                yield Path(dirpath) / name


def load_paths(paths: Sequence[str], stdin: IO[str] | None = None, *, skipped: list[SkippedInput] | None = None,
               errors: list[DraConstructsError] | None = None) -> list[Manifest]:
    """Every object in ``paths`` (files, directories walked recursively, ``-`` for ``stdin``).

    With ``skipped``, files that are no manifests (templates, kustomizations, values) are appended
    to it instead of raising; with ``errors``, malformed files are (see :mod:`.skipped`).
    """
    manifests: list[Manifest] = []

    def load(text: str, name: str, is_json: bool = False) -> None:
        manifests.extend(load_or_skip(lambda: load_text(text, name, is_json=is_json), name, text, skipped, errors))

    for raw in paths:
        if raw == STDIN:
            if stdin is None:
                raise _bad(STDIN_NAME, None, "standard input is not available", "pass file paths instead")
            load(stdin.read(), STDIN_NAME)
            continue
        path = Path(raw)
        if path.is_dir():
            for file in _walk(path):
                load(_read(file, str(file)), str(file), file.suffix.lower() == ".json")
        elif path.exists():
            load(_read(path, raw), raw, path.suffix.lower() == ".json")
        else:
            raise _bad(raw, None, "no such file or directory", "check the path", raw)
    for position, manifest in enumerate(manifests):
        manifest.position = position
    return manifests
