"""Type-check expressions that nest deeper than cel-cpp's fixed limit of 32, in pieces.

cel-cpp (the type checker here) stops at 32 levels; cel-go, the API server's, at 250
(:mod:`_depth`). An expression between the two is cut into pieces of at most
:data:`PIECE_HEIGHT` levels: bottom-up, each deep enough subtree is compiled on its own and
replaced in its parent's text by a placeholder variable of the type cel-cpp found for it.
Every piece is compiled in the full text's layout (the rest blanked to spaces, newlines kept), so
its source offsets, and the line and column of any error, are those of the whole expression.
The checked pieces are then spliced back into one ``CheckedExpr`` (ids renumbered), which the
checker's validators, cost estimate and the evaluator read as if cel-cpp had compiled it whole.

A subtree that reads a variable bound around it (a macro's or ``cel.bind``'s) is compiled with
that variable declared, of the type the binder gives it: the element (or index and element) of
the range's list, the key (or key and value) of its map, ``dyn`` of a ``dyn`` range, the type of
``cel.bind``'s value; the range is compiled alone for its type (:func:`_bound_types`). Binders
of other shapes are not cut through; when no cut avoids them, :func:`compile_deep` returns
``None`` and the engine's depth error stands. (``cel.block`` is not one: the DRA environment has
Bindings version 0, so ``cel.block`` is an undeclared reference at any depth, as on the real
servers, ``tests/cel/test_block_real.py``.)

Placeholder types nest at most :data:`TYPE_NESTING` levels, deeper parts opaque types; when a
piece reaches into one, the expression is cut lower (:data:`LOW_PIECE_HEIGHT`,
:func:`compile_deep`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

from dra_constructs.cel import _astpb
from dra_constructs.cel._depth import Node, parse
from dra_constructs.cel._validate import format_type

__all__ = ["PIECE_HEIGHT", "compile_deep", "declarations", "error_blocks", "error_location"]

#: Levels of the parse tree one piece may hold; every cel-cpp counter grows at most one per
#: level, so pieces stay well below its 32.
PIECE_HEIGHT = 16
#: Levels of a piece when an operation in a piece of :data:`PIECE_HEIGHT` reached past the
#: :data:`TYPE_NESTING` levels a placeholder's type shows: each level of a piece takes at most
#: one level off a type, so pieces this low never reach an opaque part, and each placeholder
#: shows the next 12 levels of its real type again.
LOW_PIECE_HEIGHT = 8
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
    reads: dict[str, _Binder] = field(default_factory=dict)  # bound variables it reads, by binder


@dataclass
class _Binder:
    """A macro or ``cel.bind`` call: its variables and the range (or value) that types them."""

    names: tuple[str, ...]
    source: Node  # the range of a macro, the value of ``cel.bind``
    bind: bool
    source_inner: list[_Piece] = field(default_factory=list)
    scope: dict[str, _Binder] = field(default_factory=dict)  # bound around the source
    types: tuple[bytes, ...] | None = None


#: Macros binding one variable at two arguments, two at three (cel-go's ``parser/macro.go``,
#: ``ext/comprehensions.go``, ``ext/lists.go``).
_ONE_OR_TWO = {"all", "exists", "exists_one", "existsOne"}
_ONE = {"map", "filter", "sortBy"}
_TWO = {"transformList", "transformMap", "transformMapEntry"}


def _binder(node: Node) -> tuple[_Binder, int] | None:
    """The binder of a call node and the index of its first body argument, if one is typed here."""
    if node.kind != "call" or not node.binders:
        return None
    target, args = node.children[0], node.children[1:]
    if node.name == "bind" and target.kind == "ident" and target.name == "cel" and len(args) == 3:
        count = 1
    elif node.name in _ONE_OR_TWO and len(args) in (2, 3):
        count = len(args) - 1
    elif (node.name in _ONE and len(args) in (2, 3)) or (node.name in _TWO and len(args) in (3, 4)):
        count = 1 if node.name in _ONE else 2
    else:
        return None
    names = tuple(a.name for a in args[:count])
    if any(a.kind != "ident" for a in args[:count]) or len(set(names)) != count:
        return None
    if node.name == "bind":
        return _Binder(names, args[1], True), 3
    return _Binder(names, target, False), 1 + count


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


def _reads(node: Node, out: dict[int, set[str]]) -> set[str]:
    """Free identifiers each node reads (``out[id(node)]``); a binder's body hides its variables."""
    names: set[str] = {node.name} if node.kind == "ident" else set()
    found = _binder(node)
    for position, child in enumerate(node.children):
        inner = _reads(child, out)
        if found is not None and position >= found[1]:
            inner = inner - set(found[0].names)
        elif node.binders and position > 0 and found is None:
            inner = inner - set(node.binders)
        names |= inner
    out[id(node)] = names
    return names


def _cut(tree: Node, text: str, piece_height: int | None = None,
         forced: frozenset[tuple[int, int]] = frozenset()) -> list[_Piece] | None:
    """Pieces in compile order (inner first), the whole expression last; ``None`` if no cut fits.

    The nodes spanning ``forced`` (start, end) are cut at any height.
    """
    piece_height = PIECE_HEIGHT if piece_height is None else piece_height
    reads: dict[int, set[str]] = {}
    _reads(tree, reads)
    pieces: list[_Piece] = []

    def name_fits(node: Node, name: str) -> bool:
        line_end = text.find("\n", node.start, node.end)
        return (node.end if line_end < 0 else line_end) - node.start >= len(name)

    def reduce(node: Node, parent: Node | None, index: int,
               scope: dict[str, _Binder | None]) -> tuple[int, list[_Piece]]:
        height, inner = 0, []
        found = _binder(node)
        for position, child in enumerate(node.children):
            child_scope = scope
            if found is not None and position >= found[1]:
                child_scope = {**scope, **dict.fromkeys(found[0].names, found[0])}
            elif node.binders and position > 0 and found is None:
                child_scope = {**scope, **dict.fromkeys(node.binders)}  # not typed here: not cut
            child_height, child_inner = reduce(child, node, position, child_scope)
            if found is not None and child is found[0].source:
                found[0].source_inner = list(child_inner)
                found[0].scope = {k: v for k, v in scope.items() if k in reads[id(child)] and v is not None}
                if any(scope.get(k, 0) is None for k in reads[id(child)]):
                    found = None  # its range reads a variable not typed here
            height = max(height, child_height)
            inner.extend(child_inner)
        height += 1
        bound = {name: scope[name] for name in reads[id(node)] if name in scope}
        keep = node.kind in _KEEP or any(b is None for b in bound.values()) \
            or (parent is not None and parent.kind == "global" and parent.name == "has") \
            or (parent is not None and index > 0 and node.kind == "ident" and parent.binders)
        if (height >= piece_height or (node.start, node.end) in forced) and not keep:
            name = f"_deep{len(pieces)}"
            if name in text or not name_fits(node, name):
                return height, inner
            piece = _Piece(node, name, inner, {k: v for k, v in bound.items() if v is not None})
            pieces.append(piece)
            return 1, [piece]
        return height, inner

    height, inner = reduce(tree, None, 0, {})
    if height > 2 * PIECE_HEIGHT:
        return None
    pieces.append(_Piece(tree, "", inner))
    return pieces


def _variable_types(binder: _Binder, range_type: Any, opaque: dict[bytes, str]) -> tuple[bytes, ...]:
    """The serialized ``cel.expr.Type`` of each variable of ``binder`` over ``range_type``."""
    if binder.bind:
        return (_within_type_nesting(range_type, opaque).SerializeToString(),)
    kind = range_type.WhichOneof("kind")
    if kind == "dyn" or kind == "error":
        return (_DYN_TYPE,) * len(binder.names)
    if kind == "list_type":
        elem = _within_type_nesting(range_type.list_type.elem_type, opaque).SerializeToString()
        return (elem,) if len(binder.names) == 1 else (_INT_TYPE, elem)
    if kind == "map_type":
        key = _within_type_nesting(range_type.map_type.key_type, opaque).SerializeToString()
        value = _within_type_nesting(range_type.map_type.value_type, opaque).SerializeToString()
        return (key,) if len(binder.names) == 1 else (key, value)
    raise _Unsupported(kind)


#: cel-cpp refuses to declare a variable whose type nests deeper (``type nesting limit of 13
#: exceeded``); cel-go has no such limit, and list or map literals nested deeper check there.
TYPE_NESTING = 12


def _within_type_nesting(t: Any, opaque: dict[bytes, str], left: int = TYPE_NESTING) -> Any:
    """``t`` with every part nested deeper than :data:`TYPE_NESTING` an opaque type.

    A placeholder of a piece that is a deep list or map literal is declared this way. Each
    distinct deep part becomes its own abstract type (``opaque``: serialized type to name), so
    equal parts still compare and unequal ones still fail overload resolution; the names are
    put back in errors and in the spliced tree (:func:`_restore_types`).
    """
    kind = t.WhichOneof("kind")
    if kind not in ("list_type", "map_type", "abstract_type", "type"):
        return t
    if left == 0:
        name = opaque.setdefault(t.SerializeToString(), f"_deep_t{len(opaque)}")
        return _astpb.Type(abstract_type={"name": name})
    out = _astpb.Type()
    out.CopyFrom(t)
    if kind == "list_type":
        out.list_type.elem_type.CopyFrom(_within_type_nesting(t.list_type.elem_type, opaque, left - 1))
    elif kind == "map_type":
        out.map_type.key_type.CopyFrom(_within_type_nesting(t.map_type.key_type, opaque, left - 1))
        out.map_type.value_type.CopyFrom(_within_type_nesting(t.map_type.value_type, opaque, left - 1))
    elif kind == "abstract_type":
        del out.abstract_type.parameter_types[:]
        out.abstract_type.parameter_types.extend(
            [_within_type_nesting(p, opaque, left - 1) for p in t.abstract_type.parameter_types])
    else:
        out.type.CopyFrom(_within_type_nesting(t.type, opaque, left - 1))
    return out


def _scope_declarations(reads: dict[str, _Binder], compile_range: Callable[[_Binder], Any],
                        opaque: dict[bytes, str]) -> list[tuple[str, bytes]]:
    """``(name, type)`` of the bound variables a piece reads, typing their binders first."""
    out = []
    for name, binder in sorted(reads.items()):
        if binder.types is None:
            binder.types = _variable_types(binder, compile_range(binder), opaque)
        out.append((name, binder.types[binder.names.index(name)]))
    return out


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
    return tuple((name, cel_type(_astpb.decode_type(raw))) for name, raw in extra)


def compile_deep(expression: str, make_env: Callable[[tuple[tuple[str, bytes], ...]], Any],
                 compile_text: Callable[[Any, str], tuple[Any, str | None]]) -> tuple[bytes | None, str | None] | None:
    """``(serialized CheckedExpr, None)``, ``(None, error)`` or ``None`` (cannot be cut).

    ``make_env(extra)`` is the checker's environment with the placeholders ``extra`` (name,
    serialized ``cel.expr.Type``: hashable, so environments can be cached) declared
    (:func:`declarations`); ``compile_text(env, text)`` compiles one piece into ``(program, error)``.
    When an index, call or macro in a piece reaches past the levels a placeholder's type shows,
    the expression is cut again in pieces of :data:`LOW_PIECE_HEIGHT`.
    """
    tree = parse(expression)
    if tree is None:
        return None
    for piece_height in (PIECE_HEIGHT, LOW_PIECE_HEIGHT):
        forced: frozenset[tuple[int, int]] = frozenset()
        result = _compile_pieces(expression, tree, piece_height, forced, make_env, compile_text)
        while isinstance(result, frozenset) and not result <= forced:
            forced |= result
            result = _compile_pieces(expression, tree, piece_height, forced, make_env, compile_text)
        if result is not _OPAQUE and not isinstance(result, frozenset):
            return result  # type: ignore[return-value]
    return None


_OPAQUE = object()  # an operation reached into an opaque part of a placeholder's type


def _compile_pieces(expression: str, tree: Node, piece_height: int, forced: frozenset[tuple[int, int]],
                    make_env: Callable[[tuple[tuple[str, bytes], ...]], Any],
                    compile_text: Callable[[Any, str], tuple[Any, str | None]]) -> object:
    """:func:`compile_deep` with pieces of ``piece_height`` levels; ``_OPAQUE``, or the spans of
    operands to cut (an equality, ``in`` or ``?:`` of equal types that placeholders spell apart)."""
    pieces = _cut(tree, expression, piece_height, forced)
    if pieces is None or len(pieces) < 2:
        return None
    declared: list[tuple[str, bytes]] = []
    checked_pieces: dict[str, Any] = {}
    errors: list[str] = []
    opaque: dict[bytes, str] = {}

    def compile_range(binder: _Binder) -> Any:
        """The type of a binder's range (or value), compiled alone; ``dyn`` if it has errors."""
        text = _piece_text(expression, _Piece(binder.source, "", binder.source_inner))
        scope = _scope_declarations(binder.scope, compile_range, opaque)
        program, _ = compile_text(make_env(tuple(declared + scope)), text)
        if program is None:
            return _astpb.Type(dyn={})
        checked = _astpb.decode_checked(program.serialize())
        return _real(checked.type_map[checked.expr.id], opaque)

    try:
        for piece in pieces:
            text = _piece_text(expression, piece)
            scope = _scope_declarations(piece.reads, compile_range, opaque)
            program, error = compile_text(make_env(tuple(declared + scope)), text)
            if program is None:
                if error is None or "recursion" in error or "ERROR: <input>:" not in error:
                    return None
                reached = _reaches_opaque(error, opaque, tree, expression)
                if reached is not None:
                    return reached
                errors.extend(error_blocks(_original_lines(_named(error, opaque), text, expression)))
                # like cel-go's error type, `dyn` lets the rest be checked without follow-on errors
                declared.append((piece.name, _DYN_TYPE))
                continue
            checked = _astpb.decode_checked(program.serialize())
            if not piece.name and not errors:
                spliced = _splice(checked, {p.name: checked_pieces[p.name] for p in pieces[:-1]})
                _restore_types(spliced, opaque)
                return _astpb.encode_checked(spliced), None
            checked_pieces[piece.name] = checked
            piece_type = _within_type_nesting(_real(checked.type_map[checked.expr.id], opaque), opaque)
            declared.append((piece.name, piece_type.SerializeToString()))
    except _Unsupported:
        return None
    return None, "\n".join(sorted(errors, key=error_location))


def _reaches_opaque(error: str, opaque: dict[bytes, str], tree: Node,
                    expression: str) -> object:
    """``None`` when every error naming an opaque type is cel-go's, else what to do about it.

    Such an error is cel-go's only when it is an equality, ``in`` or ``?:`` of types that differ
    once the real types are put back. One of equal types means a placeholder's type and the same
    type spelled out in the piece met: the operands' spans are returned, to be cut into
    placeholders of the same opaque type. Anything else (an index or call into an opaque part)
    is ``_OPAQUE``.
    """
    operands: set[tuple[int, int]] = set()
    for block in error_blocks(error):
        if not any(name in block for name in opaque.values()):
            continue
        named = _named(block, opaque)
        found, function = _OPERANDS.search(named), _COMPARISON.search(named)
        args = [] if found is None else _split_args(found.group(1))
        if function is None or len(args) != (3 if function.group(1) == "_?_:_" else 2):
            return _OPAQUE
        if function.group(1) == "@in":
            equal = args[1] == f"list({args[0]})" or args[1].startswith(f"map({args[0]}, ")
        else:
            equal = args[-2] == args[-1]
        if not equal:
            continue
        node = _operator_at(tree, _offset(expression, error_location(block)))
        if node is None:
            return _OPAQUE
        operands.update((child.start, child.end) for child in node.children[-2:])
    return frozenset(operands) if operands else None


def _offset(text: str, location: tuple[int, int]) -> int:
    """The offset of a 1-based line and column (cel-go's, in code points)."""
    line, column = location
    return sum(len(part) + 1 for part in text.split("\n")[:line - 1]) + column - 1


def _operator_at(node: Node, offset: int) -> Node | None:
    """The ``==``, ``!=``, ``in`` or ``?:`` node whose operator is at ``offset``."""
    if node.kind in ("==", "!=", "in", "ternary") and node.children[0].end <= offset < node.children[1].start:
        return node
    for child in node.children:
        if child.start <= offset < child.end:
            return _operator_at(child, offset)
    return None


def _split_args(text: str) -> list[str]:
    """``A, B, ...`` split at the commas outside parentheses."""
    args, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += 1 if char == "(" else -1 if char == ")" else 0
        if char == "," and depth == 0:
            args.append(text[start:i])
            start = i + 2
    return [*args, text[start:]]


_DYN_TYPE = _astpb.Type(dyn={}).SerializeToString()
_INT_TYPE = _astpb.Type(primitive=2).SerializeToString()
_COMPARISON = re.compile(r"^ERROR: <input>:\d+:\d+: found no matching overload for '(_==_|_!=_|@in|_\?_:_)'")
_OPERANDS = re.compile(r"applied to '\((.*)\)'")
_LOCATION = re.compile(r"^ERROR: <input>:(-?\d+):(-?\d+): ")


def error_blocks(error: str) -> list[str]:
    """One engine message split into its errors (each ``ERROR: ...`` line and its source lines)."""
    blocks: list[str] = []
    for line in error.split("\n"):
        if line.startswith("ERROR: ") or not blocks:
            blocks.append(line)
        else:
            blocks[-1] += "\n" + line
    return blocks


def error_location(block: str) -> tuple[int, int]:
    """cel-go prints errors ordered by line, then column."""
    found = _LOCATION.match(block)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def _named(error: str, opaque: dict[bytes, str]) -> str:
    """An error naming opaque types names the types they stand for, as cel-go prints them."""
    for raw, name in sorted(opaque.items(), key=lambda item: -len(item[1])):
        error = error.replace(name, format_type(_astpb.decode_type(raw)))
    return error


def _real(t: Any, opaque: dict[bytes, str]) -> Any:
    """A copy of ``t`` with every opaque type the type it stands for."""
    out = _astpb.Type()
    out.CopyFrom(t)
    if opaque:
        _restore(out, {name: _astpb.decode_type(raw) for raw, name in opaque.items()})
    return out


def _restore(t: Any, by_name: dict[str, Any]) -> None:
    kind = t.WhichOneof("kind")
    if kind == "abstract_type" and t.abstract_type.name in by_name:
        t.CopyFrom(by_name[t.abstract_type.name])
    elif kind == "list_type":
        _restore(t.list_type.elem_type, by_name)
    elif kind == "map_type":
        _restore(t.map_type.key_type, by_name)
        _restore(t.map_type.value_type, by_name)
    elif kind == "abstract_type":
        for p in t.abstract_type.parameter_types:
            _restore(p, by_name)
    elif kind == "type":
        _restore(t.type, by_name)


def _restore_types(checked: Any, opaque: dict[bytes, str]) -> None:
    """Every opaque type in ``checked``'s type map back to the type it stands for."""
    if not opaque:
        return
    by_name = {name: _astpb.decode_type(raw) for raw, name in opaque.items()}
    for t in checked.type_map.values():
        _restore(t, by_name)


def _original_lines(error: str, text: str, expression: str) -> str:
    """An error on a piece shows the expression's own source lines, not the blanked ones."""
    for original, blanked in zip(expression.split("\n"), text.split("\n"), strict=True):
        error = error.replace(f" | {blanked}\n", f" | {original}\n")
    return error
