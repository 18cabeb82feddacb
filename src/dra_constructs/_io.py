"""Reading a user-named input (a path, or ``-`` for standard input) with errors that say what to pass."""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import DraConstructsError

__all__ = ["read_input"]


def read_input(source: str | Path, field: str, expected: str) -> str:
    """The UTF-8 text of ``source`` (``-``: stdin); ``expected`` names the input in the fix."""
    where = str(source)
    if where == "-":
        return sys.stdin.read()
    try:
        return Path(source).read_text(encoding="utf-8")
    except OSError as error:
        raise DraConstructsError(where, field, where, f"cannot read the file ({error.strerror})",
                                 f"pass an existing {expected}") from None
    except UnicodeDecodeError:
        raise DraConstructsError(where, field, where, "not UTF-8 text", f"pass a UTF-8 {expected}") from None
