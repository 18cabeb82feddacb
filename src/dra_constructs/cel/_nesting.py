"""Redundant parentheses, removed so that cel-cpp's nesting limit (32) does not reject them.

This build of cel-cpp stops at a nesting depth of 32 (``Expression recursion limit exceeded.
limit: 32``); cel-go's parser allows 250 (:mod:`_depth`). The checker first compiles a deep
expression in pieces (:mod:`_deep`); when no cut fits (every deep part reads a variable a
macro binds around it), this is the fallback: parentheses that only wrap another parenthesized
expression (``((x))``) change nothing, so :func:`collapse_redundant_parens` replaces the outer
pair by spaces (every offset, hence every error column, stays the same) and the checker
compiles that text instead. ``docs/cel.md`` gives what is still out of reach.
"""

from __future__ import annotations

from dra_constructs.cel._depth import CEL_GO_MAX_DEPTH

__all__ = ["CEL_GO_MAX_DEPTH", "collapse_redundant_parens"]


def _pairs(text: str) -> tuple[dict[int, int], bool]:
    """Matching ``(``/``)`` offsets outside string literals, and whether they balance."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char in "'\"":
            quote = char * 3 if text.startswith(char * 3, i) else char
            raw = i > 0 and text[i - 1] in "rR"
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                j += 2 if text[j] == "\\" and not raw else 1
            i = j + len(quote)
            continue
        if char == "(":
            stack.append(i)
        elif char == ")":
            if not stack:
                return pairs, False
            pairs[stack.pop()] = i
        i += 1
    return pairs, not stack


def _is_group(text: str, open_at: int) -> bool:
    """A grouping parenthesis, not the argument list of a call (``f(``, ``x.all(``)."""
    j = open_at - 1
    while j >= 0 and text[j] in " \t\r\n":
        j -= 1
    if j < 0:
        return True
    char = text[j]
    if char.isalnum() or char == "_":  # a call, unless the word before is the keyword `in`
        start = j
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
            start -= 1
        return text[start:j + 1] == "in"
    return char not in ")]"


def _next(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    return i


def _previous(text: str, i: int) -> int:
    while i >= 0 and text[i] in " \t\r\n":
        i -= 1
    return i


def collapse_redundant_parens(text: str) -> str:
    """``text`` with every ``(`` ``(X)`` ``)`` outer pair blanked, or ``text`` itself.

    Only when the parentheses balance and nest no deeper than cel-go accepts: past that cel-go
    rejects the expression too, and so must the checker.
    """
    pairs, balanced = _pairs(text)
    if not balanced or not pairs:
        return text
    depth = deepest = 0
    for char_at in sorted([*pairs, *pairs.values()]):
        depth += 1 if char_at in pairs else -1
        deepest = max(deepest, depth)
    if deepest >= CEL_GO_MAX_DEPTH:
        return text
    chars = list(text)
    for open_at, close_at in pairs.items():
        inner_open = _next(text, open_at + 1)
        wraps_a_group = inner_open < len(text) and text[inner_open] == "(" \
            and pairs.get(inner_open) == _previous(text, close_at - 1)
        if wraps_a_group and _is_group(text, open_at) and _is_group(text, inner_open):
            chars[open_at] = chars[close_at] = " "
    return "".join(chars)
