"""What the two readers of JSON items by their likeness share (``fit/likeness.py``, ``guardrails/like_items.py``).

Both read an item of a ``kubectl -o json`` export as an item parsed before when only some of its
strings differ: they cut the parsed item's text at those strings and walk a new item along the
fixed segments. This module holds the parts that do not depend on which strings may differ: the
path of every string in a text split at its quotes, the bytes a variable string may not hold,
its longest length, and the allowances that keep failed walks and learning templates from
costing more than parsing the same bytes would. No library compares JSON texts this way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BYTES_PER_LEARNT_STRING", "BYTES_PER_STRING", "LEARN_ALLOWANCE", "MAX_VARIABLE", "UNUSUAL",
           "WALK_ALLOWANCE", "Segments", "fixed_segments", "plain_strings", "string_paths", "walk"]

#: The longest variable string read from the text; a longer one is parsed (no limit refuses it:
#: this bounds the search for its closing quote).
MAX_VARIABLE = 4096
#: What a variable string may not hold: control characters and the backslash (an escape).
UNUSUAL = bytes(range(0x20)) + b"\\"
#: Walks that fail cost Python work (a variable string each, ~1 us) that parsing the item would
#: not: they may pass this many variable strings, plus one per :data:`BYTES_PER_STRING` bytes of
#: the items read (about what parsing those bytes costs). Past that, items are parsed until the
#: bytes read earn more, so the walks never cost more than the parse: a hostile file of items that
#: fail late in the walk of every template grew with items x templates (8 MB, 64 templates: 36x
#: the parse's CPU time).
WALK_ALLOWANCE = 1 << 16
BYTES_PER_STRING = 32
#: Learning a template costs Python work per string of its text (~4 us: :func:`string_paths`, the
#: cuts): templates may hold this many strings, plus one per :data:`BYTES_PER_LEARNT_STRING` bytes
#: of the items read. A real item has one string per ~50 bytes, a hostile one per ~5: 256 of 1 MB
#: would take minutes to learn.
LEARN_ALLOWANCE = 1 << 18
BYTES_PER_LEARNT_STRING = 64

_STRUCTURE = bytes(b for b in range(256) if b not in b"{}[],")


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


#: A text cut at its variable strings: the first fixed segment, then each later one with its length.
Segments = tuple[bytes, tuple[tuple[bytes, int], ...]]


def fixed_segments(data: bytes, spans: list[tuple[int, int]]) -> Segments:
    """``data`` cut at ``spans`` (the variable strings' contents, in order): its fixed segments."""
    cuts = [0, *(edge for span in spans for edge in span), len(data)]
    segments = [data[cuts[i]:cuts[i + 1]] for i in range(0, len(cuts), 2)]
    return segments[0], tuple((segment, len(segment)) for segment in segments[1:])


def walk(segments: Segments, text: bytes | bytearray, start: int,
         limit: int) -> tuple[int, list[bytes | bytearray]] | int:
    """Where an item walked along ``segments`` in ``text[:limit]`` ends, and its variable strings (not
    checked yet: :func:`plain_strings`); if it is not like them, the variable strings the walk passed.

    (A quote found at or past ``limit`` is followed by no segment within it: the walk fails.)
    """
    first, rest = segments
    if not text.startswith(first, start, limit):
        return 0
    find, startswith = text.find, text.startswith
    position = start + len(first)
    strings: list[bytes | bytearray] = []
    for segment, length in rest:
        end = find(b'"', position, position + MAX_VARIABLE + 1)
        if end < 0 or not startswith(segment, end, limit):
            return len(strings)
        strings.append(text[position:end])
        position = end + length
    return position, strings


def plain_strings(strings: list[bytes | bytearray]) -> bool:
    """Whether every variable string is UTF-8 without escapes or control characters (read as it stands)."""
    joined = b'"'.join(strings)  # (a quote between them: a character cut in two is seen)
    if len(joined.translate(None, UNUSUAL)) != len(joined):  # (in C; a regex is ~20x slower)
        return False
    try:
        joined.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
