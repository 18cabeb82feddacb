"""Regular expressions with RE2 semantics, as Go's ``regexp`` runs them in Kubernetes.

``matches``, ``find`` and ``findAll`` of the Kubernetes CEL environment use Go's RE2 engine:
linear time, no backtracking. Python's ``re`` backtracks (``'(.*)*x'`` on a long string runs for
minutes) and differs in syntax, so patterns are compiled with Google's RE2 binding
(``google-re2``, module ``re2``). ``find_all`` follows Go's ``FindAllString``: an empty match
right after the previous match is skipped (Python's ``finditer`` keeps it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

__all__ = ["compile_pattern", "find", "find_all"]

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is reported as a CEL error, not logged to stderr


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> Any:
    """The compiled RE2 pattern, or ``ValueError("error parsing regexp: ...")``."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except Exception as error:  # re2.error, or TypeError/ValueError for text RE2 rejects
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise ValueError(f"error parsing regexp: {detail}") from None


def find(text: str, pattern: str) -> str:
    """Go ``Regexp.FindString``: the leftmost match, or ``""``."""
    match = compile_pattern(pattern).search(text)
    return str(match.group(0)) if match else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go ``Regexp.FindAllString(text, limit)`` (``limit < 0``: all matches)."""
    if limit == 0:
        return []
    regex = compile_pattern(pattern)
    found: list[str] = []
    pos, previous_end, end = 0, -1, len(text)
    while pos <= end and (limit < 0 or len(found) < limit):
        match = regex.search(text, pos)
        if match is None:
            break
        start, stop = match.span()
        accept = True
        if stop == start:  # an empty match: skip it when it abuts the previous one, advance one rune
            accept = start != previous_end
            pos = stop + 1
        else:
            pos = stop
        previous_end = stop
        if accept:
            found.append(str(match.group(0)))
    return found
