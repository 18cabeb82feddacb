"""Suggested fixes for the common DRA selector mistakes (see ``shared/reference/dra-api.md`` §5).

* ``>=`` (or ``>``, ``<``, ``<=``) on quantities or versions: no such operators; use
  ``a.compareTo(b) >= 0`` (or ``isGreaterThan``/``isLessThan``);
* a version attribute compared with a plain string: wrap the string in ``semver(...)``;
* a MIG attribute (``profile``, ``parentUUID``) read under DeviceClass ``gpu.nvidia.com``:
  full GPUs lack it, so select MIG devices through ``mig.nvidia.com``.
"""

from __future__ import annotations

import re

__all__ = ["rewrite_ordering", "suggest_fix"]

_ORDERING = re.compile(r"'_(>=|>|<=|<)_' applied to '\((kubernetes\.(?:Quantity|Semver)|dyn), (kubernetes\.(?:Quantity|Semver)|dyn)\)'")
_VERSION_ATTRS = ("cudaComputeCapability", "driverVersion", "cudaDriverVersion")
_MIG_ONLY = ("profile", "parentUUID", "memorySlice")
_STOP = {"&&", "||", "?", ":", ","}


def _operand_bounds(text: str, start: int, step: int) -> int:
    """Index just past the operand that begins at ``start`` going ``step`` (-1 left, +1 right)."""
    depth, i, quote = 0, start, ""
    limit = -1 if step < 0 else len(text)
    while i != limit:
        char = text[i]
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in ("([{" if step > 0 else ")]}"):
            depth += 1
        elif char in (")]}" if step > 0 else "([{"):
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0:
            pair = text[i:i + 2] if step > 0 else text[i - 1:i + 1]
            if pair in _STOP or char in "?:,":
                return i if step > 0 else i + (1 if char in "?:," or pair in _STOP and len(pair) == 1 else 1)
        i += step
    return len(text) if step > 0 else 0


def rewrite_ordering(expression: str, column: int, operator: str) -> str | None:
    """``a >= b`` at 1-based ``column`` of the first line rewritten as ``a.compareTo(b) >= 0``."""
    lines = expression.split("\n")
    index = column - 1
    if not lines or index < 0 or not lines[0][index:].startswith(operator):
        position = expression.find(operator)
        if position < 0:
            return None
        index = position
    left_end = _operand_bounds(expression, index - 1, -1)
    right_end = _operand_bounds(expression, index + len(operator), 1)
    lhs = expression[left_end:index].strip()
    rhs = expression[index + len(operator):right_end].strip()
    if not lhs or not rhs:
        return None
    prefix = expression[:left_end] + (" " if expression[:left_end].rstrip() != expression[:left_end] else "")
    rewritten = f"{lhs}.compareTo({rhs}) {operator} 0"
    return (expression[:left_end].rstrip() + (" " if left_end else "") + rewritten + " "
            + expression[right_end:].lstrip()).strip() if prefix is not None else None


def suggest_fix(expression: str, error: str | None, device_class: str | None = None) -> str | None:
    """A one-line fix for a failed check or a failed evaluation, or ``None``."""
    if not error:
        return None
    ordering = _ORDERING.search(error)
    if ordering:
        operator = ordering.group(1)
        position = re.search(r"<input>:1:(\d+):", error)
        rewritten = rewrite_ordering(expression, int(position.group(1)) if position else 0, operator)
        kinds = "quantities" if "Quantity" in ordering.group(0) else "versions"
        hint = f"{kinds} have no '{operator}' operator: compare with compareTo(...) {operator} 0 (or isGreaterThan/isLessThan)"
        return f"{hint}, e.g. {rewritten}" if rewritten else hint
    if "no such overload" in error or "no matching overload" in error.lower():
        for name in _VERSION_ATTRS:
            if name in expression and re.search(rf"{name}\s*(==|!=|>=|<=|>|<)\s*['\"]", expression):
                return (f"{name} is a version: compare it with semver('...'), e.g. "
                        f".{name}.compareTo(semver('9.0.0')) >= 0 or == semver('9.0.0')")
    if "no such key" in error:
        missing = re.search(r"no such key: (\w+)", error)
        name = missing.group(1) if missing else ""
        if name in _MIG_ONLY or name.startswith("memorySlice"):
            return (f"'{name}' exists only on MIG devices: request deviceClassName mig.nvidia.com "
                    f"(not {device_class or 'gpu.nvidia.com'}), or guard with '{name}' in device.attributes[...]")
        if name:
            return (f"guard optional attributes: '{name}' in device.attributes['<domain>'] && ... "
                    "(a missing attribute is a run-time error, not a non-match)")
    if "cost limit" in error:
        return "simplify the selector (fewer nested comprehensions or regular expressions)"
    return None
