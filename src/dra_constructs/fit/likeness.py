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

from dra_constructs._json_like import MAX_VARIABLE, fixed_segments, plain_strings, string_paths, walk

__all__ = ["MAX_VARIABLE", "Like", "Template", "string_paths"]


@dataclass(frozen=True)
class Like:
    """What a like item gives: its names (the rest is the template's)."""

    name: str
    node: str
    pool: str


class _Cut:
    """A template's text cut at some of its variable strings: where the fixed segments are."""

    def __init__(self, data: bytes, spans: list[tuple[int, int]], names: tuple[int, ...]) -> None:
        self.segments = fixed_segments(data, spans)
        self.names = names  # where the names are among these strings

    def walk(self, text: bytes | bytearray, start: int, limit: int) -> tuple[int, list[bytes | bytearray]] | int:
        """:func:`~dra_constructs._json_like.walk` along this cut."""
        return walk(self.segments, text, start, limit)


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
        if not plain_strings(strings):
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
