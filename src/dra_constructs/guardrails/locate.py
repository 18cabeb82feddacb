"""Point findings at the line of the offending field, not only at the object's first line.

The audit keeps only each object's start line (cheap for 10,000 objects). For each object with
findings, this module composes its YAML document again (libyaml nodes carry positions; only
those documents, cut at the ``---`` markers), finds the object's node by its start line and
follows the finding's field path as deep as the document goes (a missing field points at the
deepest key present).
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import yaml

from .engine import AuditResult
from .model import Finding, SuppressedFinding

__all__ = ["parse_field_path", "with_field_lines"]

_SEGMENT = re.compile(r"""\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")\]""")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


class _File:
    """One file's text, composed lazily one document at a time (only documents with findings)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)
        # 0-based indexes of document-marker lines: a marker at column 0 always ends a document.
        self.markers = [i for i, line in enumerate(self.lines) if line.startswith(("---", "...")) and
                        _MARKER.match(line)]
        self.nodes: dict[int, yaml.Node] = {}
        self.composed: set[int] = set()

    def node_at(self, line: int) -> yaml.Node | None:
        """The object node (document or ``kind: List`` item) starting on 1-based ``line``."""
        if line not in self.nodes:
            self._compose_around(line - 1)
        return self.nodes.get(line)

    def _compose_around(self, index: int) -> None:
        before = bisect.bisect_left(self.markers, index)  # markers[:before] are above the object
        start = self.markers[before - 1] + 1 if before else 0
        if start in self.composed:
            return
        self.composed.add(start)
        end = self.markers[before] if before < len(self.markers) else len(self.lines)
        # Blank lines keep libyaml's line numbers equal to the file's.
        chunk = "\n" * start + "".join(self.lines[start:end])
        try:
            document = yaml.compose(chunk, Loader=_Loader)
        except yaml.YAMLError:
            return
        if not isinstance(document, yaml.MappingNode):
            return
        self.nodes[document.start_mark.line + 1] = document
        for key, value in document.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
                for item in value.value:
                    self.nodes[item.start_mark.line + 1] = item


def _field_line(node: yaml.Node, keys: Sequence[str | int]) -> int:
    """Line of the deepest key (or list item) of ``keys`` present under ``node``."""
    line = int(node.start_mark.line) + 1
    for key in keys:
        if isinstance(node, yaml.MappingNode) and isinstance(key, str):
            pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
            if pair is None:
                break
            line, node = int(pair[0].start_mark.line) + 1, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and 0 <= key < len(node.value):
            node = node.value[key]
            line = int(node.start_mark.line) + 1
        else:
            break
    return line


def _relocate(findings: Sequence[Finding], files: dict[str, _File]) -> list[Finding]:
    out = []
    for finding in findings:
        file = files.get(finding.file or "")
        node = file.node_at(finding.line) if file is not None and finding.line else None
        keys = parse_field_path(finding.path) if node is not None else None
        if node is None or keys is None:
            out.append(finding)
            continue
        out.append(dataclasses.replace(finding, line=_field_line(node, keys)))
    return out


def _order(finding: Finding) -> tuple[str, int, tuple[str, int, int, int, str, str]]:
    return finding.file or "", finding.line or 0, finding.sort_key


def with_field_lines(result: AuditResult, texts: dict[str, str] | None = None) -> AuditResult:
    """The same result with each file finding's ``line`` moved to its field.

    ``texts`` supplies file contents already read (stdin); other files are read again. Files
    that no longer parse keep the object lines. Findings are re-sorted by file and line.
    """
    by_file: dict[str, list[Finding]] = defaultdict(list)
    for finding in (*result.findings, *(s.finding for s in result.suppressed)):
        if finding.file:
            by_file[finding.file].append(finding)
    files: dict[str, _File] = {}
    for file in by_file:
        try:
            text = (texts or {}).get(file)
            if text is None:
                text = Path(file).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError):
            continue
        files[file] = _File(text)
    findings = tuple(sorted(_relocate(result.findings, files), key=_order))
    suppressed = tuple(SuppressedFinding(f, s.reason) for f, s in
                       zip(_relocate([s.finding for s in result.suppressed], files), result.suppressed, strict=True))
    return AuditResult(result.objects_scanned, findings, suppressed)
