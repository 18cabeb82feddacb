"""Read a workload item of a ``kubectl -o json`` export like one read before, without parsing it.

In a cluster export the pods of one controller are one text except inside a few strings: their
names, uid, resourceVersion, timestamps, hash labels, node and status. A *template* is an item
parsed, type-checked and keyed before (a workload kind, ``shape_key`` not ``None``), with no
backslash in its text, cut at the strings whose values the shape key leaves out - under
``metadata`` the identity fields (:data:`~.shape_key.IDENTITY_METADATA`) and identity labels,
anything under ``status``, a Pod's ``spec.nodeName`` and ``spec.hostname`` - into fixed segments.
An item is like it when it walks as the template: each fixed segment at its place, each variable
string running to the next quote within :data:`MAX_VARIABLE` bytes and holding no backslash and
no control character, in UTF-8. It is then the template's object with those strings replaced: the
same JSON structure, keys, numbers and depth (every input limit and the type check hold as they
held for the template: the replaced fields are strings where strings are checked), the same
shape key (it leaves exactly those strings out), so the collector's slim copy - its own
``metadata``, the first object's other fields - is what parsing would have given. The walk also
finds where the item ends as the splitter would: the argument of ``fit/likeness.py`` (a close
starts with a newline, which no variable string holds, and only ends the template's text).

The same walk as ``fit/likeness.py`` with the audit's variable strings; the string paths, the
limits on variable strings and the allowances of failed walks and learning are shared
(``_json_like.py``), so cost is bounded as there.
"""

from __future__ import annotations

from typing import Any

from dra_constructs._json_like import (
    BYTES_PER_LEARNT_STRING,
    BYTES_PER_STRING,
    LEARN_ALLOWANCE,
    MAX_VARIABLE,
    WALK_ALLOWANCE,
    fixed_segments,
    plain_strings,
    string_paths,
    walk,
)
from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.shape_key import IDENTITY_LABELS, IDENTITY_METADATA, MEMOIZED_KINDS

__all__ = ["MAX_VARIABLE", "Likeness", "variable"]

#: Templates kept per file, and per layout (text outside strings).
_MAX_TEMPLATES = 256
_METADATA_DROPPED = "managedFields"
#: Templates are looked up by this many first bytes of an item (its kind is in them as kubectl
#: prints it), so that items of other kinds walk none; templates whose first fixed segment is
#: shorter are tried on every item.
_PREFIX = 96  # (the slim copy leaves it out: ``stream._SLIM_METADATA_DROPPED``)


def variable(path: tuple[Any, ...], kind: str) -> bool:
    """Whether a string value at ``path`` of an object of ``kind`` is left out of its shape key."""
    head = path[0]
    if head == "status":
        return True
    if head == "metadata":
        if len(path) < 2:
            return False
        if path[1] in IDENTITY_METADATA:
            return True
        return len(path) == 3 and path[1] == "labels" and path[2] in IDENTITY_LABELS
    return kind == "Pod" and len(path) == 2 and head == "spec" and path[1] in ("nodeName", "hostname")


def _replaced(value: Any, changes: list[tuple[tuple[Any, ...], str]]) -> Any:
    """``value`` with the strings at the (relative) paths of ``changes`` replaced; containers copied on the way."""
    out: Any = dict(value) if isinstance(value, dict) else list(value)
    nested: dict[Any, list[tuple[tuple[Any, ...], str]]] = {}
    for path, text in changes:
        if len(path) == 1:
            out[path[0]] = text
        else:
            nested.setdefault(path[0], []).append((path[1:], text))
    for key, inner in nested.items():
        out[key] = _replaced(value[key], inner)
    return out


class _Template:
    """A parsed item's text cut at its variable strings, and how an item like it gets its ``metadata``."""

    def __init__(self, data: bytes, manifest: Manifest) -> None:
        parts = data.split(b'"')
        paths = string_paths(parts)
        kind = manifest.kind
        cuts = [0]
        offset = 0
        #: for each variable string, its path under ``metadata`` (``None``: not the slim copy's)
        self.targets: list[tuple[Any, ...] | None] = []
        for index, part in enumerate(parts):
            path = paths[index // 2] if index % 2 else None
            if path is not None and variable(path, kind):
                cuts += [offset, offset + len(part)]
                self.targets.append(path[1:] if path[0] == "metadata" and path[1] != _METADATA_DROPPED else None)
            offset += len(part) + 1
        spans = list(zip(cuts[1::2], cuts[2::2], strict=True))
        self.segments = fixed_segments(data, spans)
        self.first, self.rest = self.segments
        self.originals = [data[begin:end] for begin, end in spans]
        #: variable strings under ``metadata``: ``(index, key)`` of a field's own value, ``(index, path)`` deeper
        self.top = [(i, t[0]) for i, t in enumerate(self.targets) if t is not None and len(t) == 1]
        self.nested = [(i, t) for i, t in enumerate(self.targets) if t is not None and len(t) > 1]
        self.shape: bytes = manifest.shape or b""
        metadata = manifest.obj.get("metadata")
        self.metadata = {k: v for k, v in metadata.items() if k != _METADATA_DROPPED} if isinstance(metadata, dict) \
            else None
        self.newlines = data.count(b"\n")
        self.close = data[data.rindex(b"\n"):]
        self.strings = len(self.rest)

    def walk(self, text: bytes | bytearray, start: int, limit: int) -> tuple[int, list[bytes | bytearray]] | int:
        """:func:`~dra_constructs._json_like.walk` along this template."""
        return walk(self.segments, text, start, limit)

    def metadata_of(self, strings: list[bytes | bytearray]) -> dict[str, Any] | None:
        """The item's ``metadata`` (``managedFields`` left out: the slim copy's), or ``None`` when a
        variable string is not plain UTF-8 text or the template has no ``metadata`` mapping."""
        if not plain_strings(strings):
            return None
        metadata = self.metadata
        if metadata is None:
            return None
        out = dict(metadata)
        originals = self.originals
        for index, key in self.top:  # (most are: name, uid, resourceVersion, timestamps)
            raw = strings[index]
            if raw != originals[index]:
                out[key] = raw.decode("utf-8")
        if self.nested:
            changes = [(path, strings[index].decode("utf-8")) for index, path in self.nested
                       if strings[index] != originals[index]]
            if changes:  # (labels, owner references: the containers on the way copied)
                out.update(_replaced({path[0]: metadata[path[0]] for path, _ in changes}, changes))
        return out


class Likeness:
    """The templates of one file and the matcher :func:`~.._json_stream.list_chunks` calls."""

    def __init__(self) -> None:
        self._templates: list[_Template] = []
        self._by_prefix: dict[bytes, list[int]] = {}  # template indexes by their first :data:`_PREFIX` bytes
        self._short: list[int] = []  # templates whose first segment is shorter
        self._seen: set[tuple[bytes, bytes]] = set()  # (layout, shape) of the templates
        self._last = 0  # the template the last like item matched
        self._successor: dict[int, int] = {}  # for each template, the one the item after its last match matched
        self._allowance = WALK_ALLOWANCE
        self._learning = LEARN_ALLOWANCE

    def read(self, length: int) -> None:
        """``length`` more bytes of items were read: walks and templates earn their allowance."""
        self._allowance += length // BYTES_PER_STRING
        self._learning += length // BYTES_PER_LEARNT_STRING

    def match(self, text: bytearray, start: int, limit: int, close: bytes) -> tuple[int, int, Any] | None:
        """``(end, newlines, (shape key, metadata))`` of the item at ``start`` if like a template."""
        templates = self._templates
        if not templates:
            return None
        candidates = self._by_prefix.get(bytes(text[start:start + _PREFIX]), []) + self._short
        if not candidates:
            return None  # (an item of another kind, mostly)
        # The template that followed the last one's match before first (pods of one controller come
        # together; an export sorted by namespace cycles through controllers), then each in turn.
        predicted = self._successor.get(self._last, self._last)
        if predicted in candidates:
            candidates.remove(predicted)
            candidates.insert(0, predicted)
        for index in candidates:
            if self._allowance <= 0:
                return None
            template = templates[index]
            if template.close != close:
                continue
            found = template.walk(text, start, limit)
            if isinstance(found, int):
                self._allowance -= found
                continue
            position, strings = found
            metadata = template.metadata_of(strings)
            if metadata is None:
                self._allowance -= len(strings)
                continue
            self._successor[self._last] = index
            self._last = index
            return position, template.newlines, (template.shape, metadata)
        return None

    def learn(self, data: bytes, manifest: Manifest) -> None:
        """``manifest`` (parsed from ``data``, checked, keyed) as a template, if it can be one."""
        if (len(self._templates) >= _MAX_TEMPLATES or manifest.shape is None or manifest.kind not in MEMOIZED_KINDS
                or b"\\" in data or not data.endswith(b"}") or b"\n" not in data):
            return
        strings = data.count(b'"') // 2
        if strings > self._learning:
            return
        layout = b'"'.join(data.split(b'"')[0::2])  # one template per layout and shape is enough
        if (layout, manifest.shape) in self._seen:
            return
        self._learning -= strings
        self._seen.add((layout, manifest.shape))
        template = _Template(data, manifest)
        index = len(self._templates)
        self._templates.append(template)
        if len(template.first) >= _PREFIX:
            self._by_prefix.setdefault(template.first[:_PREFIX], []).append(index)
        else:
            self._short.append(index)
