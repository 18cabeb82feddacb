"""Type-check expressions that nest deeper than cel-cpp's fixed limit of 32, in pieces.

cel-cpp (the type checker here) stops at 32 levels; cel-go, the API server's, at 250
(:mod:`_depth`). An expression between the two is cut into pieces of at most
:data:`PIECE_HEIGHT` levels: bottom-up, each deep enough subtree is compiled on its own and
replaced in its parent's text by a placeholder variable of the type cel-cpp found for it.
Every piece is compiled in the full text's layout (the rest blanked to spaces, newlines kept), so
its source offsets, and the line and column of any error, are those of the whole expression.
The checked pieces are then spliced back into one ``CheckedExpr`` (ids renumbered), which the
checker's validators, cost estimate and the evaluator read as if cel-cpp had compiled it whole.

A subtree that uses a variable bound around it (a macro's or ``cel.bind``'s) cannot be compiled
alone; when no cut avoids them, :func:`compile_deep` returns ``None`` and the engine's depth
error stands (``docs/cel.md``, known gaps).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from dra_constructs.cel import _astpb
from dra_constructs.cel._depth import Node, parse

__all__ = ["PIECE_HEIGHT", "compile_deep", "declarations"]

#: Levels of the parse tree one piece may hold; every cel-cpp counter grows at most one per
#: level, so pieces stay well below its 32.
PIECE_HEIGHT = 16
_PRIMITIVES = {1: "BOOL", 2: "INT", 3: "UINT", 4: "DOUBLE", 5: "STRING", 6: "BYTES"}
_WRAPPERS = {1: "BoolValue", 2: "Int64Value", 3: "UInt64Value", 4: "DoubleValue", 5: "StringValue",
             6: "BytesValue"}
#: Nodes that cannot become a placeholder: leaves gain nothing, and these must stay syntax.
_KEEP = {"ident", "literal"}


class _Unsupported(Exception):
    pass


@dataclass
class _Piece:
    node: Node
    name: str
    inner: list[_Piece]  # the nearest cut subtrees inside this one


def cel_type(t: Any) -> Any:
    """The ``cel.Type`` of a checked ``cel.expr.Type`` (for declaring a placeholder)."""
    kind = t.WhichOneof("kind")
    if kind == "primitive" and t.primitive in _PRIMITIVES:
        return getattr(cel.Type, _PRIMITIVES[t.primitive])
    if kind == "dyn":
        return cel.Type.DYN
    if kind == "null":
        return cel.Type.NULL
    if kind == "well_known" and t.well_known in (2, 3):
        return cel.Type.TIMESTAMP if t.well_known == 2 else cel.Type.DURATION
    if kind == "wrapper" and t.wrapper in _WRAPPERS:
        return cel.Type(f"google.protobuf.{_WRAPPERS[t.wrapper]}")
    if kind == "list_type":
        return cel.Type.List(cel_type(t.list_type.elem_type))
    if kind == "map_type":
        return cel.Type.Map(cel_type(t.map_type.key_type), cel_type(t.map_type.value_type))
    if kind == "message_type":
        return cel.Type(t.message_type)
    if kind == "abstract_type":
        params = [cel_type(p) for p in t.abstract_type.parameter_types]
        return cel.Type.AbstractType(t.abstract_type.name, params)
    if kind == "type":
        return cel.Type.Type(cel_type(t.type))
    raise _Unsupported(kind)


def _bound_inside(node: Node, bound: frozenset[str], out: dict[int, bool]) -> set[str]:
    """Identifiers each node reads; ``out[id(node)]`` is whether it reads one bound around it."""
    names: set[str] = {node.name} if node.kind == "ident" else set()
    inner_bound = bound | set(node.binders)
    for child in node.children:
        names |= _bound_inside(child, inner_bound if node.binders else bound, out)
    out[id(node)] = bool(names & bound)
    return names


def _cut(tree: Node, text: str) -> list[_Piece] | None:
    """Pieces in compile order (inner first), the whole expression last; ``None`` if no cut fits."""
    uses_bound: dict[int, bool] = {}
    _bound_inside(tree, frozenset(), uses_bound)
    pieces: list[_Piece] = []

    def name_fits(node: Node, name: str) -> bool:
        line_end = text.find("\n", node.start, node.end)
        return (node.end if line_end < 0 else line_end) - node.start >= len(name)

    def reduce(node: Node, parent: Node | None, index: int) -> tuple[int, list[_Piece]]:
        height, inner = 0, []
        for position, child in enumerate(node.children):
            child_height, child_inner = reduce(child, node, position)
            height = max(height, child_height)
            inner.extend(child_inner)
        height += 1
        keep = node.kind in _KEEP or uses_bound[id(node)] \
            or (parent is not None and parent.kind == "global" and parent.name == "has") \
            or (parent is not None and index > 0 and node.kind == "ident" and parent.binders)
        if height >= PIECE_HEIGHT and not keep:
            name = f"_deep{len(pieces)}"
            if name in text or not name_fits(node, name):
                return height, inner
            piece = _Piece(node, name, inner)
            pieces.append(piece)
            return 1, [piece]
        return height, inner

    height, inner = reduce(tree, None, 0)
    if height > 2 * PIECE_HEIGHT:
        return None
    pieces.append(_Piece(tree, "", inner))
    return pieces


def _piece_text(text: str, piece: _Piece) -> str:
    chars = [c if c in "\r\n" else " " for c in text]
    chars[piece.node.start:piece.node.end] = text[piece.node.start:piece.node.end]
    for inner in piece.inner:
        for i in range(inner.node.start, inner.node.end):
            if chars[i] not in "\r\n":
                chars[i] = " "
        chars[inner.node.start:inner.node.start + len(inner.name)] = inner.name
    return "".join(chars)


def _renumber(expr: Any, offset: int, seen: list[int]) -> None:
    expr.id += offset
    seen.append(expr.id)
    kind = expr.WhichOneof("kind")
    if kind == "select_expr":
        _renumber(expr.select_expr.operand, offset, seen)
    elif kind == "call_expr":
        if expr.call_expr.HasField("target"):
            _renumber(expr.call_expr.target, offset, seen)
        for arg in expr.call_expr.args:
            _renumber(arg, offset, seen)
    elif kind == "list_expr":
        for element in expr.list_expr.elements:
            _renumber(element, offset, seen)
    elif kind == "struct_expr":
        for entry in expr.struct_expr.entries:
            entry.id += offset
            if entry.HasField("map_key"):
                _renumber(entry.map_key, offset, seen)
            _renumber(entry.value, offset, seen)
    elif kind == "comprehension_expr":
        c = expr.comprehension_expr
        for part in (c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result):
            _renumber(part, offset, seen)


def _replace(expr: Any, placeholders: dict[str, Any]) -> None:
    """Put each placeholder identifier's piece in its place."""
    kind = expr.WhichOneof("kind")
    children: list[Any] = []
    if kind == "ident_expr":
        found = placeholders.get(expr.ident_expr.name)
        if found is not None:
            expr.CopyFrom(found)
            _replace(expr, placeholders)  # a piece holds the placeholders of its own pieces
        return
    if kind == "select_expr":
        children = [expr.select_expr.operand]
    elif kind == "call_expr":
        children = [*([expr.call_expr.target] if expr.call_expr.HasField("target") else []), *expr.call_expr.args]
    elif kind == "list_expr":
        children = list(expr.list_expr.elements)
    elif kind == "struct_expr":
        for entry in expr.struct_expr.entries:
            children.extend([entry.map_key] if entry.HasField("map_key") else [])
            children.append(entry.value)
    elif kind == "comprehension_expr":
        c = expr.comprehension_expr
        children = [c.iter_range, c.accu_init, c.loop_condition, c.loop_step, c.result]
    for child in children:
        _replace(child, placeholders)


def _splice(root: Any, pieces: dict[str, Any]) -> Any:
    """One ``CheckedExpr``: ``root`` with every placeholder replaced by its checked piece."""
    out = _astpb.CheckedExpr()
    out.CopyFrom(root)
    offset = max([*root.source_info.positions.keys(), *root.type_map.keys(), 0]) + 1
    replacements: dict[str, Any] = {}
    for name, checked in pieces.items():
        piece = _astpb.CheckedExpr()
        piece.CopyFrom(checked)
        ids: list[int] = []
        _renumber(piece.expr, offset, ids)
        for k, v in checked.type_map.items():
            out.type_map[k + offset].CopyFrom(v)
        for k, ref in checked.reference_map.items():
            out.reference_map[k + offset].CopyFrom(ref)
        for k, position in checked.source_info.positions.items():
            out.source_info.positions[k + offset] = position
        if len(checked.source_info.macro_calls):
            raise _Unsupported("macro_calls")
        replacements[name] = piece.expr
        offset = max([*ids, offset]) + 1
    _replace(out.expr, replacements)
    for k in [k for k, ref in out.reference_map.items() if ref.name in pieces]:  # the placeholders
        del out.reference_map[k]
        if k in out.type_map:
            del out.type_map[k]
        if k in out.source_info.positions:
            del out.source_info.positions[k]
    return out


def declarations(extra: tuple[tuple[str, bytes], ...]) -> tuple[tuple[str, Any], ...]:
    """``(name, cel.Type)`` of placeholders given as ``(name, serialized cel.expr.Type)``."""
    return tuple((name, cel_type(_astpb.Type.FromString(raw))) for name, raw in extra)


def compile_deep(expression: str, make_env: Callable[[tuple[tuple[str, bytes], ...]], Any],
                 compile_text: Callable[[Any, str], tuple[Any, str | None]]) -> tuple[bytes | None, str | None] | None:
    """``(serialized CheckedExpr, None)``, ``(None, error)`` or ``None`` (cannot be cut).

    ``make_env(extra)`` is the checker's environment with the placeholders ``extra`` (name,
    serialized ``cel.expr.Type``: hashable, so environments can be cached) declared
    (:func:`declarations`); ``compile_text(env, text)`` compiles one piece into ``(program, error)``.
    """
    tree = parse(expression)
    pieces = None if tree is None else _cut(tree, expression)
    if pieces is None or len(pieces) < 2:
        return None
    declared: list[tuple[str, bytes]] = []
    checked_pieces: dict[str, Any] = {}
    errors: list[str] = []
    try:
        for piece in pieces:
            text = _piece_text(expression, piece)
            program, error = compile_text(make_env(tuple(declared)), text)
            if program is None:
                if error is None or "recursion" in error or "ERROR: <input>:" not in error:
                    return None
                errors.extend(_blocks(_original_lines(error, text, expression)))
                # like cel-go's error type, `dyn` lets the rest be checked without follow-on errors
                declared.append((piece.name, _DYN_TYPE))
                continue
            checked = _astpb.decode_checked(program.serialize())
            if not piece.name and not errors:
                spliced = _splice(checked, {p.name: checked_pieces[p.name] for p in pieces[:-1]})
                return _astpb.encode_checked(spliced), None
            checked_pieces[piece.name] = checked
            declared.append((piece.name, checked.type_map[checked.expr.id].SerializeToString()))
    except _Unsupported:
        return None
    return None, "\n".join(sorted(errors, key=_location))


_DYN_TYPE = _astpb.Type(dyn={}).SerializeToString()
_LOCATION = re.compile(r"^ERROR: <input>:(-?\d+):(-?\d+): ")


def _blocks(error: str) -> list[str]:
    """One engine message split into its errors (each ``ERROR: ...`` line and its source lines)."""
    blocks: list[str] = []
    for line in error.split("\n"):
        if line.startswith("ERROR: ") or not blocks:
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
    return blocks


def _location(block: str) -> tuple[int, int]:
    """cel-go prints errors ordered by line, then column."""
    found = _LOCATION.match(block)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _original_lines(error: str, text: str, expression: str) -> str:
    """An error on a piece shows the expression's own source lines, not the blanked ones."""
    for original, blanked in zip(expression.split("\n"), text.split("\n"), strict=True):
        error = error.replace(f" | {blanked}\n", f" | {original}\n")
    return error
