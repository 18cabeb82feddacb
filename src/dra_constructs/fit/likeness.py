"""Read a slice like one read before without parsing it: only its names and unread values differ.

A fleet's kubectl dump repeats each slice of a node on every node; what differs is the names
(``metadata``, ``nodeName``, the pool's name) and values no claim reads (a GPU's ``uuid``). A
template is a slice parsed and checked before, with no backslash in its text, cut at the contents
of the strings that may differ - values (not keys) under ``metadata``, ``spec.nodeName``,
``spec.pool.name`` and the blanked attribute values - into fixed segments. An item is like it when
it walks as the template: each fixed segment at its place (``startswith``), each variable string
running to the next quote within :data:`MAX_VARIABLE` bytes, and holding no backslash and no
control character, in UTF-8. The item is then the template's slice with those strings replaced:
the same JSON structure, keys, numbers and depth (every input limit holds as it held for the
template), the same hash (``fit/shapes.py`` leaves exactly those strings out); its names are read
from their strings. Anything else is parsed as before.

The walk also finds where the item ends, as the splitter (``_json_stream.py``) would: its close
(a newline, the item indent, ``}``) starts with a newline, which no variable string holds, and
has no quote, while a fixed segment ends with a quote wherever a variable string follows it; so
a close inside the item would lie in one fixed segment, that is in the template's text, where
the close is only at the end (the template's close must be the file's). The cost is a few Python
operations per variable string (a fleet's GPU slice of 26 devices: ~28 in the narrow walk, ~100
in the wide one); the byte compares run in C. No library compares JSON texts this way, hence
this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_VARIABLE", "Like", "Template", "string_paths"]

#: The longest variable string read from the text (names are <= 253 bytes, a UUID attribute <= 64);
#: a longer one is parsed (no limit refuses it: this bounds the search for its closing quote).
MAX_VARIABLE = 4096

_STRUCTURE = bytes(b for b in range(256) if b not in b"{}[],")
_UNUSUAL = bytes(range(0x20)) + b"\\"  # control characters and the backslash


def string_paths(parts: list[bytes]) -> list[tuple[Any, ...] | None]:
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


@dataclass(frozen=True)
class Like:
    """What a like item gives: its names (the rest is the template's)."""

    name: str
    node: str
    pool: str


class _Cut:
    """A template's text cut at some of its variable strings: where the fixed segments are."""

    def __init__(self, data: bytes, spans: list[tuple[int, int]], names: tuple[int, ...]) -> None:
        cuts = [0, *(edge for span in spans for edge in span), len(data)]
        segments = [data[cuts[i]:cuts[i + 1]] for i in range(0, len(cuts), 2)]
        self.first, self.rest = segments[0], tuple((segment, len(segment)) for segment in segments[1:])
        self.names = names  # where the names are among these strings

    def walk(self, text: bytes | bytearray, start: int, limit: int) -> tuple[int, list[bytes | bytearray]] | int:
        """Where an item walked as this cut in ``text[:limit]`` ends, and its variable strings (not checked yet);
        if it is not like it, the variable strings the walk passed (what it cost).

        (A quote found at or past ``limit`` is followed by no segment within it: the walk fails.)
        """
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


class Template:
    """A parsed item's text (no backslash, as the splitter cut it) cut at the strings that may differ.

    An item is walked first with only the strings that differed in like items before (and the
    names) variable - on a fleet, a GPU's UUID but not its product name: a third of the Python
    operations - and, if that fails, with every string that may differ; what differs then is
    added to the narrow cut. Both walks prove the same thing (the narrow one of fewer strings).
    """

    def __init__(self, data: bytes, changeable: Callable[[tuple[Any, ...]], bool]) -> None:
        parts = data.split(b'"')
        paths = string_paths(parts)
        self._spans: list[tuple[int, int]] = []
        free: list[tuple[Any, ...]] = []
        offset = 0
        for index, part in enumerate(parts):
            path = paths[index // 2] if index % 2 else None
            if path is not None and changeable(path):
                self._spans.append((offset, offset + len(part)))
                free.append(path)
            offset += len(part) + 1
        #: where each name is among the variable strings (``ValueError``: not one)
        self._names = tuple(free.index(p) for p in (("metadata", "name"), ("spec", "nodeName"),
                                                    ("spec", "pool", "name")))
        self._data = data
        self._wide = _Cut(data, self._spans, self._names)
        self._differed = set(self._names)
        self._narrow = self._cut(self._differed)
        self.newlines = data.count(b"\n")
        self.close = data[data.rindex(b"\n"):]
        #: variable strings passed by walks that failed (the Python work spent on items not like it)
        self.wasted = 0

    def _cut(self, variable: set[int]) -> _Cut:
        kept = sorted(variable)
        return _Cut(self._data, [self._spans[i] for i in kept], tuple(kept.index(i) for i in self._names))

    def match(self, text: bytes | bytearray, start: int, limit: int) -> tuple[int, Like] | None:
        """Where an item like this template that opens at ``start`` in ``text[:limit]`` ends, and its names."""
        cut = self._narrow
        found = cut.walk(text, start, limit)
        if not isinstance(found, tuple):
            self.wasted += found
            cut = self._wide
            found = cut.walk(text, start, limit)
            if not isinstance(found, tuple):
                self.wasted += found
                return None
        position, strings = found
        joined = b'"'.join(strings)  # (a quote between them: a character cut in two is seen)
        if len(joined.translate(None, _UNUSUAL)) != len(joined):  # (in C; a regex is ~20x slower)
            return None
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            return None
        name, node, pool = (strings[i].decode("utf-8") for i in cut.names)
        if not (name and node and pool):
            return None
        if cut is self._wide:  # what differed from the template: variable in the narrow cut from now on
            data = self._data
            differed = {i for i, (a, b) in enumerate(self._spans) if strings[i] != data[a:b]}
            if not differed <= self._differed:
                self._differed |= differed
                self._narrow = self._cut(self._differed)
        return position, Like(name, node, pool)
