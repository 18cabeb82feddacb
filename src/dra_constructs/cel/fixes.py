"""Suggested fixes for the common DRA selector mistakes (see ``shared/reference/dra-api.md`` §5).

* ``>=`` (or ``>``, ``<``, ``<=``) on quantities or versions: no such operators; use
  ``a.compareTo(b) >= 0`` (or ``isGreaterThan``/``isLessThan``);
* a version attribute compared with a plain string: wrap the string in ``semver(...)``;
* a MIG attribute (``profile``, ``parentUUID``) read under DeviceClass ``gpu.nvidia.com``:
  full GPUs lack it, so select MIG devices through ``mig.nvidia.com``.
"""

from __future__ import annotations

import difflib
import re

from dra_constructs.catalog.driver import GPU_CAPACITIES, MIG_ATTRIBUTES, MIG_CAPACITIES

__all__ = ["misspelt_names", "rewrite_ordering", "suggest_fix"]

_OPERAND = r"(kubernetes\.(?:Quantity|Semver)|dyn)"
_ORDERING = re.compile(rf"'_(>=|>|<=|<)_' applied to '\({_OPERAND}, {_OPERAND}\)'")
_VERSION_ATTRS = ("cudaComputeCapability", "driverVersion", "cudaDriverVersion")
_MIG_ONLY = ("profile", "parentUUID", "memorySlice")
_STOP = {"&&", "||", "?", ":", ","}


def _operand_end(text: str, start: int, step: int) -> int:
    """Where the operand that begins at ``start`` ends, scanning by ``step`` (-1 left, +1 right):
    at an unbalanced bracket, or at ``&&``, ``||``, ``?``, ``:`` or ``,`` outside brackets and strings."""
    opening, closing = ("([{", ")]}") if step > 0 else (")]}", "([{")
    depth, quote, i = 0, "", start
    while 0 <= i < len(text):
        char = text[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in opening:
            depth += 1
        elif char in closing:
            if depth == 0:
                return i + (1 if step < 0 else 0)
            depth -= 1
        elif depth == 0 and (char in "?:," or text[min(i, i + step):max(i, i + step) + 1] in _STOP):
            return i + (1 if step < 0 else 0)
        i += step
    return len(text) if step > 0 else 0


def rewrite_ordering(expression: str, column: int, operator: str) -> str | None:
    """``a >= b`` at 1-based ``column`` of the first line rewritten as ``a.compareTo(b) >= 0``."""
    index = column - 1
    if not expression[index:].startswith(operator):
        index = expression.find(operator)
        if index < 0:
            return None
    left = _operand_end(expression, index - 1, -1)
    right = _operand_end(expression, index + len(operator), 1)
    lhs, rhs = expression[left:index].strip(), expression[index + len(operator):right].strip()
    if not lhs or not rhs:
        return None
    before, after = expression[:left].rstrip(), expression[right:].lstrip()
    middle = f"{lhs}.compareTo({rhs}) {operator} 0"
    space_before = " " if before and not before.endswith(("(", "[", "{")) else ""
    space_after = " " if after and not after.startswith((")", "]", "}", ",")) else ""
    return f"{before}{space_before}{middle}{space_after}{after}"


_CAPACITIES = tuple(dict.fromkeys((*GPU_CAPACITIES, *MIG_CAPACITIES)))
_KNOWN = (*MIG_ATTRIBUTES, *_CAPACITIES, "pcieRoot", "pciBusID")
_NVIDIA_NAME = re.compile(r"device\.(attributes|capacity)\[\s*['\"]gpu\.nvidia\.com['\"]\s*\]\.(\w+)")


def _did_you_mean(name: str, close: str) -> str:
    return (f"no NVIDIA device publishes '{name}': did you mean '{close}'? (attributes: "
            f"{', '.join(MIG_ATTRIBUTES)}; capacities: {', '.join(_CAPACITIES)})")


def misspelt_names(expression: str) -> list[str]:
    """A note per ``gpu.nvidia.com`` attribute/capacity the driver does not publish but one it does resembles.

    The API server accepts any name (attributes are dynamic); at allocation such a selector fails.
    """
    notes = []
    for match in _NVIDIA_NAME.finditer(expression):
        name = match.group(2)
        if name in _KNOWN or name.startswith("memorySlice"):
            continue
        close = difflib.get_close_matches(name, _KNOWN, n=1, cutoff=0.6)
        if close:
            notes.append(_did_you_mean(name, close[0]))
    return list(dict.fromkeys(notes))


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
        hint = (f"{kinds} have no '{operator}' operator: compare with compareTo(...) {operator} 0 "
                "(or isGreaterThan/isLessThan)")
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
        close = difflib.get_close_matches(name, _KNOWN, n=1, cutoff=0.6) if name and name not in _KNOWN else []
        if close:
            return _did_you_mean(name, close[0])
        if name:
            return (f"guard optional attributes: '{name}' in device.attributes['<domain>'] && ... "
                    "(a missing attribute is a run-time error, not a non-match)")
    if "cost limit" in error:
        return "simplify the selector (fewer nested comprehensions or regular expressions)"
    return None
