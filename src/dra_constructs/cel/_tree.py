"""A light, decoded-once tree of a checked CEL AST, for the passes that walk it many times.

Reading a field of a upb protobuf message is a C call that wraps a new Python object each time,
and asking a node's kind (``WhichOneof``), type (``type_map``) or overload (``reference_map``)
are more. The cost estimator asks each of these several times per node, so one pass turns the
``cel.expr.CheckedExpr`` into plain ``__slots__`` objects carrying, per node, its kind, id,
checked type (the ``cel.expr.Type`` message, or ``None``), resolved overload ids and its
children. ``kind`` spells ``cel.expr.Expr``'s oneof field names (``"call_expr"`` ...).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Call", "Comprehension", "Const", "Entry", "Ident", "ListLit", "Node", "Select", "StructLit", "Tree",
           "decode"]


class Node:
    """One expression node: ``kind``, ``id``, checked ``type`` and resolved ``overloads`` (of calls)."""

    __slots__ = ("id", "overloads", "type")
    kind = ""

    def __init__(self, node_id: int, type_: Any, overloads: tuple[str, ...]) -> None:
        self.id = node_id
        self.type = type_
        self.overloads = overloads


class Const(Node):
    """A literal: ``const_kind`` is the ``cel.expr.Constant`` oneof field (``None`` when unset)."""

    __slots__ = ("const_kind", "value")
    kind = "const_expr"
    const_kind: str | None
    value: Any


class Ident(Node):
    __slots__ = ("name",)
    kind = "ident_expr"
    name: str


class Select(Node):
    __slots__ = ("field", "operand", "test_only")
    kind = "select_expr"
    operand: Node
    field: str
    test_only: bool


class Call(Node):
    __slots__ = ("args", "function", "target")
    kind = "call_expr"
    function: str
    target: Node | None
    args: list[Node]


class ListLit(Node):
    __slots__ = ("elements", "optional_indices")
    kind = "list_expr"
    elements: list[Node]
    optional_indices: tuple[int, ...]


class Entry:
    """A map or message literal entry (``map_key`` is ``None`` for a message field)."""

    __slots__ = ("field_key", "id", "map_key", "optional_entry", "value")

    def __init__(self, entry_id: int, field_key: str, map_key: Node | None, value: Node, optional: bool) -> None:
        self.id = entry_id
        self.field_key = field_key
        self.map_key = map_key
        self.value = value
        self.optional_entry = optional


class StructLit(Node):
    __slots__ = ("entries", "message_name")
    kind = "struct_expr"
    message_name: str
    entries: list[Entry]


class Comprehension(Node):
    __slots__ = ("accu_init", "accu_var", "iter_range", "iter_var", "iter_var2", "loop_condition", "loop_step",
                 "result")
    kind = "comprehension_expr"
    iter_var: str
    iter_var2: str
    accu_var: str
    iter_range: Node
    accu_init: Node
    loop_condition: Node
    loop_step: Node
    result: Node


class _Unset(Node):
    """An ``Expr`` with no kind set (cel-go's ``UnspecifiedExpr``)."""

    __slots__ = ()
    kind = ""


class _Decoder:
    def __init__(self, checked: Any) -> None:
        # One pass over each map (a upb map's ``get`` costs more than reading every entry once);
        # repeated fields are read by slicing (iterating a upb container goes through Python).
        type_map = checked.type_map
        self.types: dict[int, Any] = {node_id: type_map[node_id] for node_id in type_map}
        self.references = checked.reference_map  # read for call nodes only (identifiers need none)

    def node(self, e: Any) -> Node:
        node_id = e.id
        type_ = self.types.get(node_id)
        overloads: tuple[str, ...] = ()
        kind = e.WhichOneof("kind")
        if kind == "call_expr":
            call = e.call_expr
            if node_id in self.references:
                overloads = tuple(self.references[node_id].overload_id[:])
            out: Any = Call(node_id, type_, overloads)
            out.function = call.function
            out.target = self.node(call.target) if call.HasField("target") else None
            out.args = [self.node(arg) for arg in call.args[:]]
        elif kind == "select_expr":
            sel = e.select_expr
            out = Select(node_id, type_, overloads)
            out.operand = self.node(sel.operand)
            out.field = sel.field
            out.test_only = sel.test_only
        elif kind == "ident_expr":
            out = Ident(node_id, type_, overloads)
            out.name = e.ident_expr.name
        elif kind == "const_expr":
            const = e.const_expr
            out = Const(node_id, type_, overloads)
            out.const_kind = const_kind = const.WhichOneof("kind")
            out.value = getattr(const, const_kind) if const_kind is not None else None
        elif kind == "list_expr":
            lst = e.list_expr
            out = ListLit(node_id, type_, overloads)
            out.elements = [self.node(element) for element in lst.elements[:]]
            out.optional_indices = tuple(lst.optional_indices[:])
        elif kind == "struct_expr":
            struct = e.struct_expr
            out = StructLit(node_id, type_, overloads)
            out.message_name = struct.message_name
            out.entries = [
                Entry(entry.id, entry.field_key, self.node(entry.map_key) if entry.HasField("map_key") else None,
                      self.node(entry.value), entry.optional_entry)
                for entry in struct.entries[:]]
        elif kind == "comprehension_expr":
            comp = e.comprehension_expr
            out = Comprehension(node_id, type_, overloads)
            out.iter_var, out.iter_var2, out.accu_var = comp.iter_var, comp.iter_var2, comp.accu_var
            out.iter_range = self.node(comp.iter_range)
            out.accu_init = self.node(comp.accu_init)
            out.loop_condition = self.node(comp.loop_condition)
            out.loop_step = self.node(comp.loop_step)
            out.result = self.node(comp.result)
        else:
            out = _Unset(node_id, type_, overloads)
        node: Node = out
        return node


class Tree:
    """A decoded checked expression: its ``root`` node and ``types`` (the checked type by node id)."""

    __slots__ = ("root", "types")

    def __init__(self, root: Node, types: dict[int, Any]) -> None:
        self.root = root
        self.types = types


def decode(checked: Any) -> Tree:
    """The light tree of a ``cel.expr.CheckedExpr``."""
    decoder = _Decoder(checked)
    return Tree(decoder.node(checked.expr), decoder.types)
