"""Read a slice like one read before without parsing it: only its names and unread values differ.

A fleet's kubectl dump repeats each slice of a node on every node; what differs is the names
(``metadata``, ``nodeName``, the pool's name) and values no claim reads (a GPU's ``uuid``). A
text with no backslash, split at its quotes, alternates text outside strings (even parts) and
string contents (odd parts). When a new item's even parts equal those of a slice parsed and
checked before (its *template*), and its odd parts equal the template's except at places where
the template holds a name, ``metadata`` or a blanked string value, the item is that slice with
those strings replaced: the same JSON structure, keys, numbers and depth (every input limit
holds as it held for the template), the same hash (``fit/shapes.py`` leaves exactly those
strings out), and its names are read from their parts. Those parts must be UTF-8 without a
control character, as JSON strings are. Anything else is parsed as before. No library compares
JSON texts this way; the comparison is ``bytes.split``, tuple equality and ``itemgetter`` (C).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

__all__ = ["Like", "Template", "string_paths"]

_STRUCTURE = bytes(b for b in range(256) if b not in b"{}[],")
_CONTROL = re.compile(rb"[\x00-\x1f]")


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


def _getter(indices: list[int]) -> Callable[[list[bytes]], tuple[bytes, ...]]:
    if len(indices) >= 2:
        return itemgetter(*indices)
    return lambda values: tuple(values[i] for i in indices)


@dataclass(frozen=True)
class Like:
    """What a like item gives: its names (the rest is the template's)."""

    name: str
    node: str
    pool: str


class Template:
    """A parsed slice's text as a template: which of its strings may differ in a like item."""

    def __init__(self, data: bytes, changeable: Callable[[tuple[Any, ...]], bool]) -> None:
        parts = data.split(b'"')
        self.even = tuple(parts[0::2])
        values = parts[1::2]
        paths = string_paths(parts)
        free = [i for i, path in enumerate(paths) if path is not None and changeable(path)]
        fixed = [i for i, path in enumerate(paths) if path is None or not changeable(path)]
        self.name_at, self.node_at, self.pool_at = (
            paths.index(p) for p in (("metadata", "name"), ("spec", "nodeName"), ("spec", "pool", "name")))
        self._fixed, self._free = _getter(fixed), _getter(free)
        self._fixed_values = self._fixed(values)
        self._count = len(values)

    def like(self, parts: list[bytes]) -> Like | None:
        """The names of an item split at its quotes, when it is like this template (else ``None``)."""
        values = parts[1::2]
        if len(values) != self._count or self._fixed(values) != self._fixed_values:
            return None
        free = b"".join(self._free(values))
        if _CONTROL.search(free):
            return None
        try:
            free.decode("utf-8")
            name, node, pool = (values[i].decode("utf-8") for i in (self.name_at, self.node_at, self.pool_at))
        except UnicodeDecodeError:
            return None
        return Like(name, node, pool) if name and node and pool else None
