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

The same walk as ``fit/likeness.py`` (whose string paths and limits are ``fit``'s: a slice's
names and attributes); no library compares JSON texts this way, hence this module. Cost is
bounded as there: failed walks may pass about as many strings as parsing the bytes read would
cost, and templates are learnt within an allowance of strings.
"""

from __future__ import annotations

from typing import Any

from dra_constructs.guardrails.manifest import Manifest
from dra_constructs.guardrails.shape_key import IDENTITY_LABELS, IDENTITY_METADATA, MEMOIZED_KINDS

__all__ = ["MAX_VARIABLE", "Likeness", "variable"]

#: The longest variable string read from the text; a longer one is parsed.
MAX_VARIABLE = 4096
#: Templates kept per file, and per layout (text outside strings).
_MAX_TEMPLATES = 256
#: Failed walks may pass this many variable strings, plus one per :data:`_BYTES_PER_STRING` bytes read.
_WALK_ALLOWANCE = 1 << 16
_BYTES_PER_STRING = 32
#: Templates may hold this many strings in all, plus one per :data:`_BYTES_PER_LEARNT_STRING` bytes read.
_LEARN_ALLOWANCE = 1 << 18
_BYTES_PER_LEARNT_STRING = 64

_STRUCTURE = bytes(b for b in range(256) if b not in b"{}[],")
_UNUSUAL = bytes(range(0x20)) + b"\\"  # control characters and the backslash
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


def _string_paths(parts: list[bytes]) -> list[tuple[Any, ...] | None]:
    """For each string of a JSON text split at its quotes (no backslash): its path if a value, ``None`` if a key."""
    stack: list[list[Any]] = []  # [is object, key or index, expecting a key]
    paths: list[tuple[Any, ...] | None] = []
    for i, part in enumerate(parts):
        if i % 2:
            top = stack[-1]
            if top[0] and top[2]:
                top[1], top[2] = part.decode("utf-8"), False
                paths.append(None)
            else:
                paths.append(tuple(frame[1] for frame in stack))
            continue
        for char in part.translate(None, _STRUCTURE):
            if char == 0x7B:  # {
                stack.append([True, None, True])
            elif char == 0x5B:  # [
                stack.append([False, 0, False])
            elif char in (0x7D, 0x5D):  # } ]
                stack.pop()
            elif stack[-1][0]:  # , in an object
                stack[-1][2] = True
            else:  # , in a list
                stack[-1][1] += 1
    return paths


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
        paths = _string_paths(parts)
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
        cuts.append(len(data))
        segments = [data[cuts[i]:cuts[i + 1]] for i in range(0, len(cuts), 2)]
        self.first, self.rest = segments[0], tuple((segment, len(segment)) for segment in segments[1:])
        self.originals = [data[cuts[i]:cuts[i + 1]] for i in range(1, len(cuts) - 1, 2)]
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
        """Where an item walked as this template in ``text[:limit]`` ends, and its variable strings;
        if it is not like it, the variable strings the walk passed."""
        if not text.startswith(self.first, start, limit):
            return 0
        find, startswith = text.find, text.startswith
        position = start + len(self.first)
        strings: list[bytes | bytearray] = []
        for segment, length in self.rest:
            end = find(b'"', position, position + MAX_VARIABLE + 1)
            if end < 0 or not startswith(segment, end, limit):
                return len(strings)
            strings.append(text[position:end])
            position = end + length
        return position, strings

    def metadata_of(self, strings: list[bytes | bytearray]) -> dict[str, Any] | None:
        """The item's ``metadata`` (``managedFields`` left out: the slim copy's), or ``None`` when a
        variable string is not plain UTF-8 text or the template has no ``metadata`` mapping."""
        joined = b'"'.join(strings)  # (a quote between them: a character cut in two is seen)
        if len(joined.translate(None, _UNUSUAL)) != len(joined):
            return None
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
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
        self._allowance = _WALK_ALLOWANCE
        self._learning = _LEARN_ALLOWANCE

    def read(self, length: int) -> None:
        """``length`` more bytes of items were read: walks and templates earn their allowance."""
        self._allowance += length // _BYTES_PER_STRING
        self._learning += length // _BYTES_PER_LEARNT_STRING

    def match(self, text: bytearray, start: int, limit: int, close: bytes) -> tuple[int, int, Any] | None:
        """``(end, newlines, (shape key, metadata))`` of the item at ``start`` if like a template."""
        templates = self._templates
        if not templates:
            return None
        candidates = self._by_prefix.get(bytes(text[start:start + _PREFIX]), []) + self._short
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
