"""Checks the Kubernetes CEL environment runs after type checking, which cel-cpp does not.

Kubernetes enables cel-go's AST validators (``base.go``, 1.29+): duration and timestamp
literals, regular-expression literals of ``matches`` and homogeneous aggregate literals; and
the DRA compiler requires a ``bool`` (or ``dyn``) result. Ported rules of cel-go
``cel/validator.go``; a literal is "valid" when cel-cpp (RE2, like Go's ``regexp``) can evaluate it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from cel_expr_python import cel

from . import _astpb

__all__ = ["format_type", "location", "validate"]


def format_type(t: Any) -> str:
    """cel-go's ``FormatCELType`` spelling of a checked type."""
    if t is None:
        return "dyn"
    which = t.WhichOneof("kind")
    if which == "primitive":
        return _astpb.PRIMITIVES.get(t.primitive, "dyn")
    if which == "dyn":
        return "dyn"
    if which == "null":
        return "null_type"
    if which == "well_known":
        return _astpb.WELL_KNOWN.get(t.well_known, "dyn")
    if which == "wrapper":
        return f"wrapper({_astpb.PRIMITIVES.get(t.wrapper, 'dyn')})"
    if which == "list_type":
        return f"list({format_type(t.list_type.elem_type)})"
    if which == "map_type":
        return f"map({format_type(t.map_type.key_type)}, {format_type(t.map_type.value_type)})"
    if which == "message_type":
        return str(t.message_type)
    if which == "type_param":
        return str(t.type_param)
    if which == "type":
        return f"type({format_type(t.type)})"
    if which == "abstract_type":
        params = ", ".join(format_type(p) for p in t.abstract_type.parameter_types)
        return f"{t.abstract_type.name}({params})" if params else str(t.abstract_type.name)
    if which == "error":
        return "*error*"
    return "dyn"


def location(checked: Any, expr_id: int, text: str) -> tuple[int, int]:
    """1-based line and column of node ``expr_id`` (offsets count code points, as in cel-go)."""
    offset = checked.source_info.positions.get(expr_id, 0)
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return line, column + 1


def issue(checked: Any, expr_id: int, text: str, message: str) -> str:
    """``ERROR: <input>:L:C: message`` plus the source line and a caret, as cel-go prints it."""
    line, column = location(checked, expr_id, text)
    lines = text.split("\n")
    source = lines[line - 1] if 0 < line <= len(lines) else ""
    caret = "." * (column - 1) + "^"
    return f"ERROR: <input>:{line}:{column}: {message}\n | {source}\n | {caret}"


def _walk(e: Any) -> Iterator[Any]:
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        kind = node.WhichOneof("kind")
        if kind == "select_expr":
            stack.append(node.select_expr.operand)
        elif kind == "call_expr":
            stack.extend(node.call_expr.args)
            if node.call_expr.HasField("target"):
                stack.append(node.call_expr.target)
        elif kind == "list_expr":
            stack.extend(node.list_expr.elements)
        elif kind == "struct_expr":
            for entry in node.struct_expr.entries:
                stack.append(entry.value)
                if entry.HasField("map_key"):
                    stack.append(entry.map_key)
        elif kind == "comprehension_expr":
            comp = node.comprehension_expr
            stack.extend([comp.iter_range, comp.accu_init, comp.loop_condition, comp.loop_step, comp.result])


@cache
def _literal_env() -> Any:
    return cel.NewEnv()


@cache
def _literal_ok(function: str, literal: str) -> bool:
    """Does ``function(literal)`` (or ``''.matches(literal)``) evaluate without error in cel-cpp?"""
    quoted = '"' + literal.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'
    source = f"''.matches({quoted})" if function == "matches" else f"{function}({quoted})"
    try:
        value = _literal_env().compile(source).eval()
    except Exception:  # an engine refusal is a failed literal, not a crash
        return False
    return bool(value.type() != cel.Type.ERROR)


def _unwrap_optional(t: Any) -> Any:
    if t is not None and t.WhichOneof("kind") == "abstract_type" and t.abstract_type.name == "optional_type" \
            and t.abstract_type.parameter_types:
        return t.abstract_type.parameter_types[0]
    return t


def _equivalent(a: Any, b: Any) -> bool:
    return bool(a.SerializeToString(deterministic=True) == b.SerializeToString(deterministic=True))


def validate(checked: Any, text: str) -> list[str]:
    """The issues of the Kubernetes AST validators, in cel-go's format."""
    issues: list[str] = []
    types = checked.type_map
    dyn = _astpb.Type()
    dyn.dyn.SetInParent()
    for node in _walk(checked.expr):
        kind = node.WhichOneof("kind")
        if kind == "call_expr":
            call = node.call_expr
            if call.function in ("duration", "timestamp", "matches") and call.args:
                arg = call.args[0]
                if arg.WhichOneof("kind") == "const_expr" and arg.const_expr.WhichOneof("kind") == "string_value" \
                        and not _literal_ok(call.function, arg.const_expr.string_value):
                    issues.append(issue(checked, arg.id, text, f"invalid {call.function} argument"))
        elif kind == "list_expr":
            optional = set(node.list_expr.optional_indices)
            first = None
            for index, element in enumerate(node.list_expr.elements):
                et = types.get(element.id, dyn)
                if index in optional:
                    et = _unwrap_optional(et)
                if first is None:
                    first = et
                elif not _equivalent(first, et):
                    issues.append(issue(checked, element.id, text,
                                        f"expected type '{format_type(first)}' but found '{format_type(et)}'"))
                    break
        elif kind == "struct_expr" and not node.struct_expr.message_name:
            key_type = value_type = None
            for entry in node.struct_expr.entries:
                kt = types.get(entry.map_key.id, dyn)
                vt = types.get(entry.value.id, dyn)
                if entry.optional_entry:
                    vt = _unwrap_optional(vt)
                if key_type is None:
                    key_type, value_type = kt, vt
                    continue
                if not _equivalent(key_type, kt):
                    issues.append(issue(checked, entry.map_key.id, text,
                                        f"expected type '{format_type(key_type)}' but found '{format_type(kt)}'"))
                if value_type is not None and not _equivalent(value_type, vt):
                    issues.append(issue(checked, entry.value.id, text,
                                        f"expected type '{format_type(value_type)}' but found '{format_type(vt)}'"))
    return issues
