"""The library's own error type: every bad input ends here, never in a traceback from deeper code."""

from __future__ import annotations

TYPE_CHECKING = False  # no typing import at start-up (docs/performance.md)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["DraConstructsError"]


class DraConstructsError(ValueError):
    """Invalid input to a dra-constructs construct, checker or command.

    The message always names where (``path``: construct path or file), the ``field``, the bad
    ``value`` and a ``fix``, so a user can act on it without reading our source.
    """

    def __init__(self, path: str, field: str, value: Any, problem: str, fix: str) -> None:
        self.path = path
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(f"{path}: {field}={value!r}: {problem}. Fix: {fix}")
