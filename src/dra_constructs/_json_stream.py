"""Read the items of a ``kubectl get ... -o json`` file one by one, in memory bounded by an item.

``kubectl`` prints a ``List`` with a 4-space indent: ``"items": [`` on a line of its own, each
item opening ``{`` and closing ``}`` at the start of a line one level deeper, ``},`` between
items. JSON strings hold no raw newline, so what starts a line is structure: the item texts are
found with byte searches and each is parsed on its own by :func:`~._safe_load.json_document`
(orjson where provably equal, every limit of docs/input-limits.md; its depth counted from the
document's root). A streaming parser (ijson) would build the same objects through a Python event
loop at a fraction of orjson's speed; none we know reads a layout this way, hence this module.

The split is trusted only when it is *the* parse of the file: each item text parses alone as
one JSON value, items are separated by exactly ``,`` and a newline, and the text around the
items - the prefix up to ``[`` and the suffix from ``]`` - parses, with a random token in place
of the items, as a ``*List`` object whose top-level ``items`` is that token. By JSON's grammar
the file is then that object with the parsed items. Anything else (another layout, compact
JSON, YAML, a byte order mark, not UTF-8, any limit or syntax error) raises
:class:`NotStreamable` and the caller reads the file whole through the usual loader, which
reports errors exactly as before. Items already yielded are then void: the caller starts over.
"""

from __future__ import annotations

import io
import os
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from dra_constructs._io import ReadBudget, _refuse_special
from dra_constructs._safe_load import _SURROGATE_ESCAPE, MAX_DEPTH, _orjson, json_document, proven_json
from dra_constructs.errors import DraConstructsError

__all__ = ["BLOCK_BYTES", "LOOKAHEAD", "Chunk", "Item", "Matcher", "NotStreamable", "list_chunks", "list_items",
           "parse_item", "parse_items", "read_item"]

#: Bytes read at a time; memory holds about two blocks plus one item.
BLOCK_BYTES = 8 << 20
#: Bytes kept after an item's start for ``match`` (more are read when fewer are left).
LOOKAHEAD = 2 << 20

_HEADER = re.compile(rb'(?:^|\n)( *)"items": \[\n( +)\{\n')


#: ``match(text, start, limit, close)``: ``(end, newlines, value)`` of the item at ``start``, or ``None``.
Matcher = Callable[[bytearray, int, int, bytes], "tuple[int, int, Any] | None"]


class NotStreamable(Exception):
    """The file is not a kubectl-style JSON ``List`` this reader can split: read it whole."""


@dataclass(frozen=True)
class Item:
    """One item of the list: its value, the line it opens on, and its bytes' span in the file."""

    value: Any
    line: int
    start: int
    end: int


class Chunk(NamedTuple):
    """One item's text (not parsed yet), the line it opens on, and its span in the file.

    (A named tuple: made once an item, it costs a third of a frozen dataclass's ``__init__``.)
    """

    data: bytes
    line: int
    start: int
    end: int
    matched: Any = None  # what ``match`` read the item as (then ``data`` is empty)


def _open(path: str, budget: ReadBudget) -> io.BufferedReader:
    """``path`` opened as :func:`~._io.read_bytes` opens it (regular files only, within ``budget``)."""
    field, expected = "document", "Kubernetes manifest (UTF-8 YAML or JSON)"
    try:
        _refuse_special(os.stat(path).st_mode, path, field, expected)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise DraConstructsError(path, field, path, f"cannot read the file ({error.strerror or error})",
                                 f"pass an existing, readable {expected}") from None
    handle = os.fdopen(fd, "rb")
    try:
        status = os.fstat(fd)
        _refuse_special(status.st_mode, path, field, expected)
        budget.take(status.st_size, path, field)
    except BaseException:
        handle.close()
        raise
    return handle


def parse_item(chunk: bytes, path: str, line: int) -> Any:
    """An item's text parsed and checked (depth counted from the file's root); else :class:`NotStreamable`."""
    try:
        return json_document(chunk.decode("utf-8"), path, first_line=line, nested=2)
    except (UnicodeDecodeError, DraConstructsError):
        raise NotStreamable from None


def parse_items(chunks: list[bytes]) -> list[Any] | None:
    """Items' texts parsed as :func:`parse_item` parses each, with the checks done once for them all;
    ``None``: parse each with :func:`parse_item` (which reports as before).

    Each text is parsed by orjson alone (so each is exactly one JSON value), and the checks of
    orjson's proven path (``_safe_load.proven_json``: every key counted, within the depth, no
    integer read as a float) run once on the texts joined into one array: its key bound, key
    count, digit runs and escapes are the sums of its items' (a text ends with ``}``: the ``,``
    between two adds no key end, escape or digit run), so equal sums of per-item bounds that
    cannot be exceeded mean each item's are equal; the array's items sit one level below it
    (``nested=1``) as a ``List``'s items sit two below the file's root (``nested=2``). Anything
    else (invalid UTF-8, a surrogate escape, a limit, a syntax error) gives ``None``. Saves the
    per-call overhead of the checks (about ten calls an item) on runs of small items.
    """
    if _orjson is None:
        return None
    data = b"[" + b",".join(chunks) + b"]"
    try:
        text = data.decode("utf-8")
        values = [_orjson.loads(chunk) for chunk in chunks]
    except (UnicodeDecodeError, _orjson.JSONDecodeError, RecursionError):
        return None
    if "\\" in text and _SURROGATE_ESCAPE.search(text):
        return None
    return values if proven_json(data, values, MAX_DEPTH - 1) else None


def list_items(path: str, budget: ReadBudget) -> Iterator[Item]:
    """Every item of the JSON ``List`` in ``path``, parsed and checked (see the module's docstring).

    Raises :class:`NotStreamable` (possibly after some items) when the file must be read whole;
    :class:`~.errors.DraConstructsError` when it cannot be read at all (special file, over budget).
    """
    for chunk in list_chunks(path, budget):
        yield Item(parse_item(chunk.data, path, chunk.line), chunk.line, chunk.start, chunk.end)


def list_chunks(path: str, budget: ReadBudget, match: Matcher | None = None) -> Iterator[Chunk]:
    """The items' texts, unparsed (:func:`parse_item` parses one); as :func:`list_items` otherwise.

    ``match(text, start, limit, close)``, when given, is tried first at each item's ``{`` (at
    ``start`` in ``text``, whose bytes from ``limit`` on are not the file's, with at least
    :data:`LOOKAHEAD` bytes after ``start`` unless the file ends): ``(end,
    newlines, value)`` when it read the item itself - ``end`` where ``close`` ends it, as the search
    for the first ``close`` would find, ``newlines`` the newlines in it - which then comes as a
    :class:`Chunk` with no ``data`` and ``value`` in ``matched``; ``None`` to have it cut here.
    """
    with _open(path, budget) as handle:
        yield from _items(handle, path, match)


class _Window:
    """The file's bytes from ``base`` on in ``buffer[:limit]``; past ``limit`` are stale bytes.

    One buffer is read into (``readinto``) and what is left moved to its front: a byte is copied
    from the kernel once, and at most :data:`LOOKAHEAD` bytes a block again.
    """

    def __init__(self, handle: io.BufferedReader) -> None:
        self.handle = handle
        self.buffer = bytearray(BLOCK_BYTES + LOOKAHEAD)
        self.base = self.limit = 0
        self.more = True  # whether the file may have more bytes

    def fill(self, start: int, need: int) -> int:
        """At least ``need`` bytes from ``start`` on (fewer at the end of the file); ``start``'s new place."""
        if self.limit - start >= need or not self.more:
            return start
        left = self.limit - start
        if start:
            with memoryview(self.buffer) as view:
                view[:left] = view[start:self.limit]
            self.base, self.limit, start = self.base + start, left, 0
        if len(self.buffer) < need + BLOCK_BYTES:
            self.buffer.extend(bytes(need + BLOCK_BYTES - len(self.buffer)))
        view = memoryview(self.buffer)
        while self.more and self.limit < need:
            read = self.handle.readinto(view[self.limit:])
            self.more = bool(read)
            self.limit += read or 0
        del view  # (a bytearray with a view cannot grow)
        return start


def _items(handle: io.BufferedReader, path: str, match: Matcher | None) -> Iterator[Chunk]:
    window = _Window(handle)
    window.fill(0, BLOCK_BYTES)
    buffer = window.buffer
    header = _HEADER.search(buffer, 0, window.limit)
    if header is None or buffer.startswith(b"\xef\xbb\xbf", 0, window.limit):
        raise NotStreamable
    indent, child = bytes(header.group(1)), bytes(header.group(2))
    if len(child) <= len(indent):
        raise NotStreamable
    start = header.end() - 2  # the first item's ``{``
    prefix = bytes(buffer[:start - len(child) - 1])  # up to and with ``[``
    close, separator, ending = b"\n" + child + b"}", b",\n" + child + b"{", b"\n" + indent + b"]"
    line = buffer.count(b"\n", 0, start) + 1
    closed, separated = len(close), len(separator)
    limit = window.limit
    while True:
        if limit - start < LOOKAHEAD and window.more:  # (``fill``'s own test, without the call)
            start = window.fill(start, LOOKAHEAD)
            buffer, limit = window.buffer, window.limit
        found = match(buffer, start, limit, close) if match is not None else None
        if found is not None:
            stop, newlines, value = found
            chunk = Chunk(b"", line, window.base + start, window.base + stop, value)
        else:
            end = buffer.find(close, start, limit)
            searched = 0  # from ``start``
            while end < 0:
                if not window.more:
                    raise NotStreamable
                searched = max(searched, limit - start - closed)
                start = window.fill(start, limit - start + BLOCK_BYTES)
                buffer, limit = window.buffer, window.limit
                end = buffer.find(close, start + searched, limit)
            stop = end + closed
            data = bytes(buffer[start:stop])
            chunk, newlines = Chunk(data, line, window.base + start, window.base + stop), data.count(b"\n")
        if limit - stop < separated and window.more:
            length = stop - start
            start = window.fill(start, length + separated)
            stop, buffer, limit = start + length, window.buffer, window.limit
        yield chunk
        line += newlines
        if buffer.startswith(separator, stop, limit):
            start, line = stop + separated - 1, line + 1
            continue
        if not buffer.startswith(ending, stop, limit):
            raise NotStreamable
        _check_wrapper(prefix, bytes(buffer[stop + len(ending):limit]) + handle.read(), path)
        return


def _check_wrapper(prefix: bytes, suffix: bytes, path: str) -> None:
    token = secrets.token_hex(16).encode()
    if token in prefix or token in suffix:
        raise NotStreamable
    try:
        wrapper = json_document((prefix + b'"' + token + b'"]' + suffix).decode("utf-8"), path)
    except (UnicodeDecodeError, DraConstructsError):
        raise NotStreamable from None
    if not isinstance(wrapper, dict) or wrapper.get("items") != [token.decode()]:
        raise NotStreamable
    kind, api_version = wrapper.get("kind"), wrapper.get("apiVersion")
    if not (isinstance(kind, str) and kind.endswith("List") and isinstance(api_version, str) and api_version):
        raise NotStreamable


def read_item(path: str, start: int, end: int, line: int) -> Any:
    """An item again, from its span (the file read before by :func:`list_items`)."""
    with open(path, "rb") as handle:
        handle.seek(start)
        chunk = handle.read(end - start)
    try:
        return json_document(chunk.decode("utf-8"), path, first_line=line, nested=2)
    except UnicodeDecodeError:
        raise DraConstructsError(f"{path}:{line}", "document", None, "the file changed while it was read",
                                 "run the command again on a file nobody writes to") from None
