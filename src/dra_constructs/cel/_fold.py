"""Constant folding of type conversions, as cel-go's ``OptOptimize`` does when the program is built.

The Kubernetes base environment plans programs with ``cel.EvalOptions(cel.OptOptimize)``. Its
``decOptimize`` decorator evaluates a type conversion (``int``, ``uint``, ``double``, ``string``,
``bytes``, ``bool``, ``duration``, ``timestamp``, ``dyn``, ``type``) whose one argument is a
constant, and a failing conversion (``int('abc')``) makes ``env.Program`` fail: the DRA compiler
reports ``program instantiation failed: ...`` and the API server rejects the selector. cel-cpp
folds nothing, so the rules of cel-go's ``common/types`` conversions (Go's ``strconv``) are
ported here for constant arguments; a folded conversion is itself a constant for its parent.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["folding_issue", "folds_conversions"]

_CONVERSIONS = frozenset({"int", "uint", "double", "string", "bytes", "bool", "duration", "timestamp", "dyn", "type"})
_INT = re.compile(r"[+-]?[0-9]+")
_UINT = re.compile(r"[0-9]+")
_DEC_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX_FLOAT = re.compile(r"[+-]?0[xX](?:_?[0-9a-fA-F])*\.?(?:_?[0-9a-fA-F])*[pP][+-]?[0-9]+")
_SPECIAL_FLOAT = re.compile(r"[+-]?(?:inf|infinity)|nan", re.IGNORECASE)
_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
          "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}
_MAX_INT, _MIN_INT, _MAX_UINT = (1 << 63) - 1, -(1 << 63), (1 << 64) - 1
_MIN_UNIX, _MAX_UNIX = -62135596800, 253402300799  # 0001-01-01 .. 9999-12-31T23:59:59Z


class _Fail(Exception):
    """A conversion cel-go cannot do: its message is the program-instantiation error."""


def _const(node: Any) -> tuple[str, Any] | None:
    kind = node.const_kind
    if kind is None:
        return None
    return {"int64_value": "int", "uint64_value": "uint", "double_value": "double", "string_value": "string",
            "bytes_value": "bytes", "bool_value": "bool", "null_value": "null"}.get(kind, "other"), node.value


def _parse_float(text: str) -> float:
    if _SPECIAL_FLOAT.fullmatch(text):
        return float(text)
    if _DEC_FLOAT.fullmatch(text):
        value = float(text)
    elif _HEX_FLOAT.fullmatch(text):
        sign = -1.0 if text.startswith("-") else 1.0
        value = sign * float.fromhex(text.lstrip("+-").replace("_", ""))
    else:
        raise _Fail(f'strconv.ParseFloat: parsing "{text}": invalid syntax')
    if math.isinf(value):
        raise _Fail(f'strconv.ParseFloat: parsing "{text}": value out of range')
    return value


def _convert(function: str, kind: str, value: Any) -> tuple[str, Any]:
    if kind == "other" or function == "dyn":
        return kind, value  # dyn(x) is x; an unmodelled value folds to an unknown (never failing) constant
    if function == "string" and kind in ("int", "uint", "bool", "string"):
        return "string", str(value).lower() if kind == "bool" else str(value)
    if function == "bytes" and kind == "string":
        return "bytes", value.encode("utf-8")
    if function == "int":
        if kind == "string":
            if not _INT.fullmatch(value):
                raise _Fail(f'strconv.ParseInt: parsing "{value}": invalid syntax')
            if not _MIN_INT <= int(value) <= _MAX_INT:
                raise _Fail(f'strconv.ParseInt: parsing "{value}": value out of range')
            return "int", int(value)
        if kind == "uint" and value > _MAX_INT:
            raise _Fail("integer overflow")
        if kind == "double":
            if math.isnan(value) or math.isinf(value) or value <= float(_MIN_INT) or value >= float(_MAX_INT):
                raise _Fail("integer overflow")
            return "int", int(value)
        return "int", value
    if function == "uint":
        if kind == "string":
            if not _UINT.fullmatch(value):
                raise _Fail(f'strconv.ParseUint: parsing "{value}": invalid syntax')
            if int(value) > _MAX_UINT:
                raise _Fail(f'strconv.ParseUint: parsing "{value}": value out of range')
            return "uint", int(value)
        if kind == "int" and value < 0:
            raise _Fail("unsigned integer overflow")
        if kind == "double" and (math.isnan(value) or math.isinf(value) or value < 0 or value >= 2.0**64):
            raise _Fail("unsigned integer overflow")
        return "uint", int(value) if kind in ("int", "double") else value
    if function == "double":
        return "double", _parse_float(value) if kind == "string" else float(value)
    if function == "bool" and kind == "string":
        if value not in _BOOLS:
            raise _Fail(f'strconv.ParseBool: parsing "{value}": invalid syntax')
        return "bool", _BOOLS[value]
    if function == "string" and kind == "bytes":
        try:
            return "string", bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _Fail("invalid UTF-8 in bytes, cannot convert to string") from None
    if function == "timestamp" and kind == "int" and not _MIN_UNIX <= value <= _MAX_UNIX:
        raise _Fail("timestamp overflow")
    return "other", None  # duration/timestamp strings are the literal validators' job; the rest succeed


_CALLED = re.compile(r"\b(?:" + "|".join(sorted(_CONVERSIONS)) + r")\s*\(")


def folds_conversions(text: str) -> bool:
    """Does the text call a type conversion (which cel-go may fold when building the program)?"""
    return _CALLED.search(text) is not None


def folding_issue(root: Any, text: str) -> str | None:
    """``program instantiation failed: <error>`` of the first failing constant conversion, or ``None``."""
    if not folds_conversions(text):  # no conversion is called: nothing to fold
        return None
    failure: list[str] = []

    def fold(node: Any) -> tuple[str, Any] | None:
        """The constant value of ``node`` after folding, or ``None`` (not constant)."""
        which = node.kind
        if which == "const_expr":
            return _const(node)
        if which == "call_expr":
            call = node
            values = [fold(arg) for arg in call.args]
            if call.target is not None:
                fold(call.target)
                return None
            if call.function in _CONVERSIONS and len(values) == 1 and values[0] is not None and not failure:
                try:
                    return _convert(call.function, *values[0])
                except _Fail as error:
                    failure.append(str(error))
            return None
        if which == "select_expr":
            fold(node.operand)
        elif which == "list_expr":
            for element in node.elements:
                fold(element)
        elif which == "struct_expr":
            for entry in node.entries:
                if entry.map_key is not None:
                    fold(entry.map_key)
                fold(entry.value)
        elif which == "comprehension_expr":
            comp = node
            for part in (comp.iter_range, comp.accu_init, comp.loop_condition, comp.loop_step, comp.result):
                fold(part)
        return None

    fold(root)
    return f"program instantiation failed: {failure[0]}" if failure else None
