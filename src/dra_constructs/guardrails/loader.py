"""Read manifests from files, directories and stdin (pure Python).

YAML (multi-document) and JSON; ``kind: List`` (and ``*List``) objects are flattened into their
items. Each object keeps its file and the line its document (or list item) starts on.
Unreadable or malformed input raises :class:`~dra_constructs.errors.DraConstructsError` with
``file:line``, never a parser traceback; so do inputs past the limits (size, nesting depth,
alias expansion, duplicate keys: docs/input-limits.md) and wrong-typed fields the rules read
(:mod:`.shape`).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

import yaml

from dra_constructs._io import ReadBudget, read_input
from dra_constructs._progress import Progress
from dra_constructs._safe_load import count_nodes, json_document, no_gc, node_line, yaml_documents
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.manifest import Manifest, field_path
from dra_constructs.guardrails.shape import metadata_only_ok, shape_problem
from dra_constructs.guardrails.shape_key import IDENTITY_LABELS, shape_key
from dra_constructs.guardrails.skipped import SkippedInput, load_or_skip

__all__ = ["MANIFEST_SUFFIXES", "MAX_AUDIT_INPUT_BYTES", "STDIN", "STDIN_NAME", "ListSink", "ManifestSink",
           "document_objects", "each_input", "json_item_lines", "load_paths", "load_text", "size_arg"]

#: Bytes ``audit`` (and :func:`load_paths`) reads in all by default: a 200,000-object cluster
#: export is ~100 MB; ``- </dev/zero`` still stops. ``--max-input-bytes`` sets another (or none).
MAX_AUDIT_INPUT_BYTES = 256 * 1024 * 1024

#: File suffixes a directory walk picks up.
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: The path argument meaning standard input, and the name findings give it.
STDIN = "-"
STDIN_NAME = "<stdin>"

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available


def _bad(file: str, line: int | None, problem: str, fix: str, value: Any = None) -> DraConstructsError:
    where = f"{file}:{line}" if line else file
    return DraConstructsError(where, "document", value, problem, fix)


def _item_nodes(node: yaml.Node | None) -> list[yaml.Node]:
    """The ``items`` nodes of a ``kind: List`` document node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
                return list(value.value)
    return []


_Located = Iterator[tuple[dict[str, Any], int | None]]
# Composes a document's nodes when an error needs a line (JSON is parsed without positions).
_NodeSource = Callable[[], "yaml.Node | None"]


def _check_shape(m: Manifest, node: yaml.Node | _NodeSource | None, seen: dict[bytes, bytes] | None) -> None:
    """Refuse ``m`` if a field the rules read has the wrong type (:func:`shape_problem`).

    With ``seen`` (the shape keys of objects that passed), an object whose shape key passed
    before is checked only in the fields its key leaves out (names, identity labels): the rest
    of it is, as JSON, the object that passed. A problem there is reported by the full check.
    """
    key = shape_key(m) if seen is not None else None
    if key is not None and seen is not None:
        known = seen.get(key)
        if known is not None and _identity_ok(m.obj):
            m.shape = known  # the first key object: one per shape in memory
            return
    elif metadata_only_ok(m.obj):
        return  # (a kind checked in ``metadata`` only: no walk)
    problem = shape_problem(m.obj)
    if problem is None:
        if key is not None and seen is not None:
            m.shape = seen.setdefault(key, key)
        return
    file, line = m.file or "", m.line
    keys, expected, value = problem
    if callable(node):
        node = node()
    at = node_line(node, keys) if node is not None else line
    field = field_path("", *keys)
    shown = type(value).__name__ if isinstance(value, dict | list) else value
    raise DraConstructsError(f"{file}:{at}" if at else file, field, shown,
                             f"must be {expected}, not {_type_name(value)} (the API server rejects this object)",
                             f"write {field} as {expected}")


def _identity_ok(obj: dict[str, Any]) -> bool:
    """The fields :func:`shape_key` leaves out that :func:`shape_problem` reads have their types."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return False
    for name in ("name", "generateName"):
        value = metadata.get(name)
        if value is not None and not isinstance(value, str):
            return False
    labels = metadata.get("labels")
    if isinstance(labels, dict) and not IDENTITY_LABELS.isdisjoint(labels):
        return all(labels[key] is None or isinstance(labels[key], str) for key in IDENTITY_LABELS if key in labels)
    return True


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number"}.get(type(value), type(value).__name__)


def _objects(doc: Any, file: str, line: int | None, node: yaml.Node | _NodeSource | None,
             item_lines: list[int] | None = None, seen: dict[bytes, bytes] | None = None) -> Iterator[Manifest]:
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
        if item_lines is not None and callable(node):  # JSON: lines from the line index, nodes on demand
            source = node
            for i, item in enumerate(items):
                item_source: _NodeSource = functools.partial(_item_node, source, i)
                yield from _objects(item, file, item_lines[i], item_source, seen=seen)
            return
        if callable(node):
            node = node()
        item_nodes = _item_nodes(node)
        for i, item in enumerate(items):
            item_node = item_nodes[i] if i < len(item_nodes) else None
            item_line = item_node.start_mark.line + 1 if item_node is not None else line
            yield from _objects(item, file, item_line, item_node, seen=seen)
        return
    manifest = Manifest(doc, file=file, line=line)
    _check_shape(manifest, node, seen)
    yield manifest


def document_objects(doc: Any, file: str, line: int | None) -> _Located:
    """The objects of one parsed document (a ``*List`` flattened), checked as :func:`load_text` checks them."""
    return ((m.obj, m.line) for m in _objects(doc, file, line, None))


def _load_yaml(text: str, file: str, seen: dict[bytes, bytes] | None = None) -> Iterator[Manifest]:
    for document in yaml_documents(text, file):
        yield from _objects(document.value, file, document.line, document.node, seen=seen)


def _compose_json(text: str, file: str) -> yaml.Node | None:
    """JSON is YAML: libyaml's composer gives the positions json.loads does not (within the node limit)."""
    count_nodes(text, file)
    try:
        return yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return None


def _item_node(document: _NodeSource, index: int) -> yaml.Node | None:
    nodes = _item_nodes(document())
    return nodes[index] if index < len(nodes) else None


_ITEMS = re.compile(r'^( *)"items": \[$', re.MULTILINE)


def json_item_lines(text: str, count: int) -> list[int] | None:
    """1-based start lines of the ``count`` items of a pretty-printed JSON ``List`` (``None`` if not one).

    JSON strings hold no raw newline, so what starts a line is structure: in ``kubectl -o json``
    output (and ``json.dumps(indent=...)``) each item opens ``{`` at the first line deeper than
    ``"items": [``. The lines are found with string searches (C speed) and trusted only when
    exactly ``count`` are found before the closing ``]``; other layouts go through the composer.
    """
    opened = _ITEMS.search(text)
    if opened is None or count == 0:
        return None
    indent = len(opened.group(1))
    position = opened.end()  # the newline ending the ``"items": [`` line
    end = text.find("\n", position + 1)
    next_line = text[position + 1:end if end >= 0 else len(text)]
    child = len(next_line) - len(next_line.lstrip(" "))
    closing = text.find("\n" + " " * indent + "]", position)
    if child <= indent or not next_line.lstrip(" ").startswith("{") or closing < 0:
        return None
    marker = "\n" + " " * child + "{"
    line = text.count("\n", 0, position) + 1  # the items line
    lines: list[int] = []
    while len(lines) <= count:
        found = text.find(marker, position, closing + 1)
        if found < 0:
            break
        line += text.count("\n", position, found)  # the line ending at ``found``
        lines.append(line + 1)
        line, position = line + 1, found + 1
    return lines if len(lines) == count else None


def _load_json(text: str, file: str, seen: dict[bytes, bytes] | None = None) -> Iterator[Manifest]:
    doc = json_document(text, file)
    node: _NodeSource = functools.cache(lambda: _compose_json(text, file))
    items = doc.get("items") if isinstance(doc, dict) else None
    item_lines = json_item_lines(text, len(items)) if isinstance(items, list) and items else None
    yield from _objects(doc, file, 1, node, item_lines, seen)


class ManifestSink(Protocol):
    """Where the loader puts the objects it reads, one at a time (the audit keeps a compact form)."""

    def add(self, manifest: Manifest) -> None:
        """One more object, in input order."""

    def mark(self) -> Any:
        """The position now, for :meth:`rollback`."""

    def rollback(self, mark: Any) -> None:
        """Forget every object added since ``mark`` (a file read again another way, or refused)."""


class ListSink:
    """A :class:`ManifestSink` that keeps every object (what :func:`load_paths` returns)."""

    def __init__(self) -> None:
        self.manifests: list[Manifest] = []

    def add(self, manifest: Manifest) -> None:
        self.manifests.append(manifest)

    def mark(self) -> int:
        return len(self.manifests)

    def rollback(self, mark: int) -> None:
        del self.manifests[mark:]


def load_text(text: str, file: str, *, is_json: bool = False) -> list[Manifest]:
    """Parse one file's (or stdin's) text: JSON files with ``json``, anything else as YAML.

    YAML text that fails to parse but is valid JSON (JSON with tabs, say) is read as JSON.
    Limits (size, depth, aliases, duplicate keys) and field types: docs/input-limits.md.
    """
    sink = ListSink()
    _load_text_into(text, file, is_json, sink, None)
    return sink.manifests


def _load_text_into(text: str, file: str, is_json: bool, sink: ManifestSink, seen: dict[bytes, bytes] | None) -> None:
    """:func:`load_text` into ``sink`` (document by document; nothing of the file is left there on an error)."""
    mark = sink.mark()

    def take(objects: Iterator[Manifest]) -> None:
        try:
            for manifest in objects:
                sink.add(manifest)
        except BaseException:
            sink.rollback(mark)
            raise

    if is_json:
        take(_load_json(text, file, seen))
        return
    if text.lstrip()[:1] in ("{", "["):  # JSON on stdin or in a .yaml file: the fast parser first
        try:
            take(_load_json(text, file, seen))
            return
        except DraConstructsError:
            pass  # YAML flow style, or broken: the YAML path reports it as before
    try:
        take(_load_yaml(text, file, seen))
    except DraConstructsError as error:
        if text.lstrip().startswith(("{", "[")) and "malformed YAML" in error.problem:
            try:
                json_document(text, file)
            except DraConstructsError:
                pass
            else:
                take(_load_json(text, file, seen))
                return
        raise


def _read(path: Path | str, budget: ReadBudget, stdin: IO[str] | None = None) -> str:
    return read_input(path, "document", "Kubernetes manifest (UTF-8 YAML or JSON)", budget=budget, stdin=stdin)


def _walk(root: Path) -> Iterator[Path]:
    """Manifest files under ``root`` in a stable order, skipping hidden directories."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if name.lower().endswith(MANIFEST_SUFFIXES):
                yield Path(dirpath) / name


def load_paths(paths: Sequence[str], stdin: IO[str] | None = None, *,
               texts: dict[str, str] | None = None, skipped: list[SkippedInput] | None = None,
               errors: list[DraConstructsError] | None = None, max_bytes: int | None = MAX_AUDIT_INPUT_BYTES,
               progress: Progress | None = None, budget: ReadBudget | None = None) -> list[Manifest]:
    """Every object in ``paths`` (files, directories walked recursively, ``-`` for ``stdin``).

    All inputs together are read within ``max_bytes`` (default :data:`MAX_AUDIT_INPUT_BYTES`,
    ``None``: no total limit; each document keeps its limits); special files (FIFOs, devices)
    are refused without reading. ``progress`` is told the files and objects read. ``texts`` (optional) receives each
    input's text by its file name (for :func:`~dra_constructs.guardrails.locate.with_field_lines`).
    With ``skipped``, files that are no manifests (templates, kustomizations, values) are appended
    to it instead of raising; with ``errors``, malformed files are (see :mod:`.skipped`). ``budget``:
    bytes shared with other reads (instead of ``max_bytes``).
    """
    with no_gc():
        return _load_paths(paths, stdin, texts, skipped, errors, budget or ReadBudget.of(max_bytes), progress)


def _load_paths(paths: Sequence[str], stdin: IO[str] | None, texts: dict[str, str] | None,
                skipped: list[SkippedInput] | None, errors: list[DraConstructsError] | None,
                budget: ReadBudget, progress: Progress | None) -> list[Manifest]:
    manifests: list[Manifest] = []
    if progress is not None:
        progress.step("reading")
    for files, (source, file, is_json) in enumerate(each_input(paths, stdin), 1):
        if progress is not None:
            progress.update(files, unit=f"files, {len(manifests):,} objects")
        text = _read(source, budget, stdin)
        if texts is not None:
            texts[file] = text
        load = functools.partial(load_text, text, file, is_json=is_json)
        manifests.extend(load_or_skip(load, file, text, skipped, errors))
    for position, manifest in enumerate(manifests):
        manifest.position = position
    return manifests


def each_input(paths: Sequence[str], stdin: IO[str] | None) -> Iterator[tuple[Path | str, str, bool]]:
    """``(source, name in findings, is JSON)`` of every input file in order (directories walked)."""
    for raw in paths:
        if raw == STDIN:
            if stdin is None or getattr(stdin, "closed", False):
                raise _bad(STDIN_NAME, None, "standard input is closed or not available",
                           "pipe manifests into the command, or pass file paths instead of -")
            yield STDIN, STDIN_NAME, False
            continue
        path = Path(raw)
        if path.is_dir():
            for file in _walk(path):
                yield file, str(file), file.suffix.lower() == ".json"
        elif os.path.lexists(path):
            yield path, raw, path.suffix.lower() == ".json"
        else:
            raise _bad(raw, None, "no such file or directory", "check the path", raw)


_UNITS = {"": 1, "k": 1000, "kb": 1000, "kib": 1024, "m": 1000**2, "mb": 1000**2, "mib": 1024**2,
          "g": 1000**3, "gb": 1000**3, "gib": 1024**3}


def size_arg(value: str) -> int | None:
    """``--max-input-bytes`` (``audit``, ``fit``): bytes, or with a KiB/MiB/GiB suffix; ``none``: no limit."""
    if value.lower() == "none":
        return None
    number = value.rstrip("kKmMgGiIbB")
    unit = value[len(number):].lower()
    if not number.isdigit() or unit not in _UNITS or int(number) == 0:
        raise argparse.ArgumentTypeError(f"a size in bytes > 0, optionally with KiB, MiB or GiB (e.g. 512MiB), "
                                         f"not {value!r}")
    return int(number) * _UNITS[unit]
