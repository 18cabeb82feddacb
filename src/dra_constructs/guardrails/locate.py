"""Point findings at the line of the offending field, not only at the object's first line.

The audit keeps only each object's start line (cheap for 10,000 objects). For each object with
findings, this module composes its YAML document again (libyaml nodes carry positions; only
those documents, cut at the ``---`` markers, each composed alone: linear in the file size),
finds the object's node by its start line and follows the finding's field path as deep as the
document goes (a missing field points at the deepest key present).
"""

from __future__ import annotations

import ast
import bisect
import collections
import functools
import itertools
import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

import yaml

from dra_constructs._io import ReadBudget, read_input
from dra_constructs._safe_load import no_gc, node_line
from dra_constructs.errors import DraConstructsError
from dra_constructs.guardrails.engine import AuditResult
from dra_constructs.guardrails.model import Finding, SuppressedFinding

__all__ = ["parse_field_path", "with_field_lines"]

_SEGMENT = re.compile(r"""\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\]""")
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available


class _PositionLoader(_Loader):  # type: ignore[misc,valid-type]
    """Composes nodes for their positions only: tags are left unresolved (a fifth faster)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        return "?"


def parse_field_path(path: str) -> list[str | int] | None:
    """``spec.containers[0].resources.limits['nvidia.com/gpu']`` -> its keys; ``None`` if unparsable."""
    keys: list[str | int] = []
    position = 0
    while position < len(path):
        match = _SEGMENT.match(path, position)
        if match is None or match.end() == position:
            return None
        ident, index, quoted = match.groups()
        keys.append(ident if ident is not None else int(index) if index is not None else ast.literal_eval(quoted))
        position = match.end()
    return keys


_MARKER = re.compile(r"^(---|\.\.\.)(\s|$)")
_DECODER = json.JSONDecoder()
#: Every JSON string (matched whole, from its opening quote), with the ``:`` that makes it a key.
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"(\s*:)?')
#: Characters YAML counts as line breaks that JSON allows raw inside strings (the loader and editors do
#: not break lines there): escaped before composing, so that node lines are the file's "\n" lines.
_YAML_ONLY_BREAKS = {0x85: "\\x85", 0x2028: "\\u2028", 0x2029: "\\u2029"}
#: Composed JSON objects kept by layout (a cluster export repeats a few layouts many times).
_LAYOUTS_KEPT = 4096


class _File:
    """One file's text, composed lazily one document at a time (only documents with findings).

    Each document is composed on its own (its lines only), so locating is linear in the file's
    size; node lines are shifted by the document's first line.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        #: JSON (``kubectl -o json``): each object's text is cut at its start line, not the whole file composed.
        self.json = text.lstrip()[:1] in ("{", "[")
        self.nodes: dict[int, tuple[yaml.Node, int]] = {}  # 1-based file line -> (node, line offset)
        self._offsets: list[int] | None = None  # character offset of each line (JSON only)
        self.composed: set[int] = set()
        #: An object's layout (:func:`_layout`) -> its composed node (see _compose_json_object).
        self._layouts: dict[_Layout, yaml.Node] = {}
        #: Text between the strings of an object -> which of its strings are keys (:func:`_layout`).
        self._keys_at: dict[tuple[str, ...], tuple[int, ...]] = {}

    @functools.cached_property
    def lines(self) -> list[str]:
        """The text's lines (YAML, or JSON composed whole): not split for a JSON list's objects."""
        return self.text.splitlines(keepends=True)

    @functools.cached_property
    def markers(self) -> list[int]:
        """0-based indexes of document-marker lines: a marker at column 0 always ends a document."""
        return [i for i, line in enumerate(self.lines) if line.startswith(("---", "...")) and _MARKER.match(line)]

    def node_at(self, line: int) -> tuple[yaml.Node, int] | None:
        """The object node (document or ``kind: List`` item) starting on 1-based ``line``, and its offset."""
        if line not in self.nodes:
            if self.json and self._compose_json_object(line - 1):
                return self.nodes.get(line)
            self._compose_around(line - 1)
        return self.nodes.get(line)

    def _compose_json_object(self, index: int) -> bool:
        """Compose only the JSON object that opens on 0-based line ``index`` (its end found by
        ``raw_decode``); ``False`` when the line opens none (then the whole document is composed)."""
        if self._offsets is None:
            # "\n" lines, as the loader counts them (splitlines also breaks at U+2028 and others)
            self._offsets = list(itertools.accumulate(map((1).__add__, map(len, self.text.split("\n"))), initial=0))
        if index + 1 >= len(self._offsets):
            return False
        start = self.text.find("{", self._offsets[index], self._offsets[index + 1])
        if start < 0:
            return False
        try:
            _, end = _DECODER.raw_decode(self.text, start)
        except (ValueError, RecursionError):
            return False
        # Objects whose texts differ only inside string values (names, uids, node names...) have
        # their nodes on the same lines: a JSON string holds no raw line break (raw_decode is
        # strict, and the breaks only YAML sees are escaped), so only keys, structure and whitespace
        # place lines. Such an object reuses the node composed for the first one (node lines are
        # relative to the object's text).
        node = self._compose_object_text(self.text[start:end])
        if node is None:
            return False
        self.nodes[index + 1] = (node, index)
        return True

    def _compose_object_text(self, text: str) -> yaml.Node | None:
        """The composed node of one JSON object's text (its first line is the node's line 0)."""
        if not text.isascii():  # raw_decode passed: they are inside strings, where YAML reads escapes
            text = text.translate(_YAML_ONLY_BREAKS)
        layout = _layout(text, self._keys_at)
        node = self._layouts.get(layout)
        if node is None:
            node = _position_node(text)
            if not isinstance(node, yaml.MappingNode):
                return None
            if len(self._layouts) < _LAYOUTS_KEPT:
                self._layouts[layout] = node
        return node

    def _compose_around(self, index: int) -> None:
        before = bisect.bisect_left(self.markers, index)  # markers[:before] are above the object
        start = self.markers[before - 1] + 1 if before else 0
        if start in self.composed:
            return
        self.composed.add(start)
        end = self.markers[before] if before < len(self.markers) else len(self.lines)
        document = _position_node("".join(self.lines[start:end]))
        if not isinstance(document, yaml.MappingNode):
            return
        self.nodes[document.start_mark.line + 1 + start] = (document, start)
        for key, value in document.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
                for item in value.value:
                    self.nodes[item.start_mark.line + 1 + start] = (item, start)



class _SpanFile(_File):
    """A file read item by item (``_json_stream``, ``_yaml_items``): each object's bytes are read again
    from its span and composed alone, so locating holds one object's text, not the file's."""

    def __init__(self, path: str, spans: dict[int, tuple[int, int]]) -> None:
        super().__init__("")
        self.json = True
        self.path = path
        self.spans = spans  # 1-based start line -> bytes [start, end) of the object
        self.handle: BinaryIO | None = None
        #: Lines of the YAML items whose nodes are kept, oldest first (each item's node is its own, ~50 kB
        #: for a Pod: only the last :data:`_YAML_ITEMS_KEPT` are kept, and their lines are not memoized).
        self.items: collections.deque[int] = collections.deque()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()

    def node_at(self, line: int) -> tuple[yaml.Node, int] | None:
        if line not in self.nodes and line in self.spans:
            start, end = self.spans[line]
            try:
                if self.handle is None:
                    self.handle = open(self.path, "rb")  # noqa: SIM115 - closed by close()
                self.handle.seek(start)
                text = self.handle.read(end - start).decode("utf-8")
            except (OSError, UnicodeDecodeError):
                return None
            if text.lstrip(" ")[:1] == "-":  # an item of a YAML ``*List`` (``_yaml_items``): composed where it was
                located = _yaml_item_node(text, line)
                if located is not None:
                    self.nodes[line] = located
                    self.items.append(line)
                    if len(self.items) > _YAML_ITEMS_KEPT:
                        del self.nodes[self.items.popleft()]
                return located
            node = self._compose_object_text(text)
            if node is not None:
                self.nodes[line] = (node, line - 1)
        return self.nodes.get(line)


def _position_node(text: str) -> yaml.Node | None:
    """The node of ``text`` (one YAML document) with its marks, or None where it cannot be composed."""
    loader = _PositionLoader(text)
    try:
        node: yaml.Node | None = loader.get_single_node()
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    finally:
        loader.dispose()
    return node


#: YAML item nodes a :class:`_SpanFile` keeps (an object's findings usually come together).
_YAML_ITEMS_KEPT = 64


def _yaml_item_node(text: str, line: int) -> tuple[yaml.Node, int] | None:
    """The node of the YAML list item whose lines are ``text`` (it starts ``- ``), under ``items:`` as in
    its file, and the offset of its lines: ``line`` is the file line of its node."""
    root = _position_node("items:\n" + text)
    if not isinstance(root, yaml.MappingNode) or len(root.value) != 1:
        return None
    items = root.value[0][1]
    if not isinstance(items, yaml.SequenceNode) or len(items.value) != 1:
        return None
    node = items.value[0]
    return node, line - 1 - node.start_mark.line


def _blank_value(match: re.Match[str]) -> str:
    """A key as it is, a string value as ``""``."""
    return match.group(0) if match.group(1) else '""'


#: What places an object's nodes: its text with the string values blanked, in one of two spellings.
_Layout = str | tuple[tuple[str, ...], tuple[str, ...]]


def _layout(text: str, keys_at: dict[tuple[str, ...], tuple[int, ...]]) -> _Layout:
    """The object's text with its string values blanked (``_blank_value``), or for a text without a
    backslash the same information as a pair, made without a Python call per string: the text between
    its strings (structure, whitespace, numbers; every ``"`` delimits a string there) and its keys' texts.
    Two texts have equal pairs exactly when their blanked texts are equal (a string is a key when the
    text after it starts with ``:``, so the structure says which are keys: known once per structure).
    """
    if "\\" in text:
        return _JSON_STRING.sub(_blank_value, text)
    parts = text.split('"')
    structure = tuple(parts[0::2])
    at = keys_at.get(structure)
    if at is None:
        at = tuple(i for i in range(1, len(parts) - 1, 2) if parts[i + 1].lstrip().startswith(":"))
        if len(keys_at) < _LAYOUTS_KEPT:
            keys_at[structure] = at
    return structure, tuple(map(parts.__getitem__, at))


def _relocate(findings: Sequence[Finding], files: dict[str, _File]) -> list[Finding]:
    out = []
    # Objects of one layout share their node (``_compose_object_text``): a field's line relative to
    # it is found once per node and path. (Keyed by the node's id: ``files`` keeps every node alive.)
    lines: dict[tuple[int, str], int | None] = {}
    for finding in findings:
        file = files.get(finding.file or "")
        located = file.node_at(finding.line) if file is not None and finding.line else None
        if located is None:
            out.append(finding)
            continue
        node, offset = located
        slot = (id(node), finding.path)
        if slot in lines:
            line = lines[slot]
        else:
            keys = parse_field_path(finding.path)
            line = node_line(node, keys) if keys is not None else None
            if not isinstance(file, _SpanFile) or finding.line not in file.items:  # (a YAML item's node may go)
                lines[slot] = line
        out.append(finding if line is None else _with_line(finding, line + offset))
    return out


def _with_line(finding: Finding, line: int) -> Finding:
    """``dataclasses.replace(finding, line=line)`` without its per-field work (tens of thousands of findings)."""
    located = object.__new__(Finding)
    located.__dict__.update(finding.__dict__, line=line)
    return located


def _order(finding: Finding) -> tuple[str, int, tuple[str, int, int, int, str, str]]:
    return finding.file or "", finding.line or 0, finding.sort_key


def with_field_lines(result: AuditResult, texts: dict[str, str] | None = None, *,
                     spans: Mapping[tuple[str, int], tuple[int, int]] | None = None,
                     sources: Mapping[str, str] | None = None) -> AuditResult:
    """The same result with each file finding's ``line`` moved to its field.

    ``texts`` supplies file contents already read; other files are read again within the input
    limits (``sources`` maps a name in the findings to the file to read instead: stdin's copy).
    ``spans`` gives, by ``(file, object line)``, the bytes of objects read item by item
    (:attr:`~.manifest.Manifest.span`): a file whose findings all have one is not read whole,
    only those objects are. Files that no longer read or parse keep the object lines. Findings
    are re-sorted by file and line.
    """
    with no_gc():
        return _with_field_lines(result, texts, spans or {}, sources or {})


def _with_field_lines(result: AuditResult, texts: dict[str, str] | None,
                      spans: Mapping[tuple[str, int], tuple[int, int]], sources: Mapping[str, str]) -> AuditResult:
    by_file: dict[str, list[int]] = defaultdict(list)  # indexes into ``every``
    every = [*result.findings, *(s.finding for s in result.suppressed)]
    for index, finding in enumerate(every):
        if finding.file:
            by_file[finding.file].append(index)
    located = list(every)
    for file, indexes in by_file.items():  # one file's text (or objects) in memory at a time
        found = [every[i] for i in indexes]
        path = sources.get(file, file)
        opened: _File
        if all(f.line and (file, f.line) in spans for f in found):
            opened = _SpanFile(path, {f.line: spans[file, f.line] for f in found if f.line})
        else:
            text = (texts or {}).get(file)
            if text is None:
                try:  # read again (it was read within the limits before)
                    text = read_input(path, "document", "Kubernetes manifest", budget=ReadBudget.of(None))
                except DraConstructsError:
                    continue
            opened = _File(text)
        try:
            for i, finding in zip(indexes, _relocate(found, {file: opened}), strict=True):
                located[i] = finding
        finally:
            if isinstance(opened, _SpanFile):
                opened.close()
    count = len(result.findings)
    findings = tuple(sorted(located[:count], key=_order))
    suppressed = tuple(SuppressedFinding(f, s.reason) for f, s in zip(located[count:], result.suppressed, strict=True))
    return AuditResult(result.objects_scanned, findings, suppressed)
